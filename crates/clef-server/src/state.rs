//! What every handler shares: settings, the model once loaded, the queue, the metrics and the
//! draining flag.

use crate::admission::Admission;
use crate::body_budget::BodyBudget;
use crate::config::ServerConfig;
use crate::connections::Connections;
use crate::loaded::LoadedModel;
use crate::metrics::{Gauges, Metrics};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub struct AppState {
    pub config: ServerConfig,
    model: OnceLock<Arc<LoadedModel>>,
    pub admission: Arc<Admission>,
    /// Open connections and whether each is in a request (the connection limit).
    pub connections: Arc<Connections>,
    /// Bytes of request bodies being read, for all connections together.
    pub body_budget: BodyBudget,
    pub metrics: Metrics,
    draining: AtomicBool,
}

impl AppState {
    pub fn new(config: ServerConfig) -> Arc<AppState> {
        let admission = Admission::new(config.concurrency, config.queue_depth);
        Arc::new(AppState {
            model: OnceLock::new(),
            admission,
            connections: Connections::new(config.max_connections),
            body_budget: BodyBudget::new(config.body_budget_bytes),
            config,
            metrics: Metrics::default(),
            draining: AtomicBool::new(false),
        })
    }

    /// The model, once loaded.
    pub fn model(&self) -> Option<Arc<LoadedModel>> {
        self.model.get().cloned()
    }

    /// Publish the loaded model; false if one was already installed (it is kept).
    pub fn install(&self, model: LoadedModel) -> bool {
        self.model.set(Arc::new(model)).is_ok()
    }

    /// Loaded and not shutting down.
    pub fn is_ready(&self) -> bool {
        self.model.get().is_some() && !self.is_draining()
    }

    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// The `/metrics` exposition.
    pub fn metrics_text(&self) -> String {
        self.metrics.render(&Gauges {
            admission: &self.admission,
            connections: &self.connections,
            body_budget: &self.body_budget,
            model_loaded: self.model.get().is_some(),
            draining: self.is_draining(),
            resident_bytes: clef_engine::resident_bytes(),
            state_cache: self.model.get().map(|m| m.engine.state_cache().stats()),
        })
    }
}
