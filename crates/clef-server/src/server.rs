//! Binding, serving and graceful shutdown.

use crate::config::{ConfigError, ServerConfig};
use crate::loaded::LoadedModel;
use crate::routes::router;
use crate::state::AppState;
use axum::serve::ListenerExt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

pub struct Server {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
}

/// Lets the code that loads the model publish it, and anyone start draining.
#[derive(Clone)]
pub struct ServerHandle(Arc<AppState>);

impl ServerHandle {
    pub fn install(&self, model: LoadedModel) -> bool {
        self.0.install(model)
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.0
    }
}

impl Server {
    /// Validate the settings and bind the socket (the model is installed later).
    pub async fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        config.validate()?;
        let addr = config.addr;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        Ok(Server {
            listener,
            state: AppState::new(config),
        })
    }

    /// The bound address (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, ServerError> {
        Ok(self.listener.local_addr()?)
    }

    pub fn handle(&self) -> ServerHandle {
        ServerHandle(self.state.clone())
    }

    /// Serve until `shutdown` completes, then stop accepting connections, answer requests
    /// that arrive on open connections with 503, finish the ones in flight and return.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let state = self.state.clone();
        let signal = async move {
            shutdown.await;
            state.begin_drain();
            tracing::info!(
                in_flight = state.admission.running(),
                queued = state.admission.waiting(),
                "shutting down: finishing in-flight requests, refusing new ones"
            );
        };
        // Answers are one small write each; do not let Nagle hold them back.
        let listener = self.listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, router(self.state))
            .with_graceful_shutdown(signal)
            .await?;
        Ok(())
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received"),
        _ = terminate => tracing::info!("SIGTERM received"),
    }
}
