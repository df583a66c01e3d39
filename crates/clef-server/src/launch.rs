//! Running a server process end to end: the async runtime, binding, loading the model in the
//! background, serving until SIGINT/SIGTERM (or a failed load) and a bounded wind-down.

use crate::config::ServerConfig;
use crate::loaded::load_model;
use crate::names::NameOptions;
use crate::server::{shutdown_signal, Server, ServerError};
use clef_engine::EngineConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Launch {
    pub config: ServerConfig,
    pub model_dir: PathBuf,
    pub engine: EngineConfig,
    pub names: NameOptions,
    /// Threads of the async runtime (network only; inference runs on the rayon pool).
    pub io_threads: usize,
    /// Called once the socket is bound, before the model is loaded (e.g. to print the
    /// address that port 0 picked).
    pub on_listening: Box<dyn FnOnce(SocketAddr) + Send>,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Names(#[from] crate::names::NameError),
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error("loading the model from {dir}: {message}")]
    Load { dir: PathBuf, message: String },
}

/// Serve until a shutdown signal; blocking. Returns an error if the model cannot be loaded
/// (after closing the listener) or the socket cannot be bound.
pub fn serve_blocking(launch: Launch) -> Result<(), LaunchError> {
    let Launch {
        config,
        model_dir,
        engine,
        names,
        io_threads,
        on_listening,
    } = launch;
    names.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads.max(1))
        // Parsing and inference run on the blocking pool; bound it so a burst of large
        // bodies cannot start hundreds of threads.
        .max_blocking_threads(64 + config.concurrency)
        .thread_name("clef-serve")
        .enable_all()
        .build()
        .map_err(LaunchError::Runtime)?;
    let load_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let dir_for_error = model_dir.clone();
    let outcome = runtime.block_on({
        let load_error = load_error.clone();
        async move {
            let server = Server::bind(config).await?;
            let addr = server.local_addr()?;
            on_listening(addr);
            tracing::info!(%addr, model = %model_dir.display(), "listening; loading the model");

            let handle = server.handle();
            let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<String>();
            let dir = model_dir.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let loading = tokio::task::spawn_blocking(move || load_model(&dir, engine, &names));
                match loading.await {
                    Ok(Ok(model)) => {
                        let described = &model.description;
                        match &described.video_files {
                            Ok(found) => tracing::info!(
                                ffmpeg = %found.ffmpeg,
                                ffmpeg_version = %found.ffmpeg_version,
                                ffprobe = %found.ffprobe,
                                ffprobe_version = %found.ffprobe_version,
                                "video programs"
                            ),
                            Err(reason) if described.vision => {
                                tracing::warn!("video files will be refused (422): {reason}")
                            }
                            Err(_) => {}
                        }
                        if let Some(reason) = described.kernels.refused {
                            tracing::warn!(
                                isa = described.kernels.isa,
                                "AMX is off, the kernels run without it: {reason}"
                            );
                        }
                        tracing::info!(
                            names = %model.names.listing(),
                            revision = %described.revision,
                            format = %described.format,
                            vision = described.vision,
                            // What the kernels run on (CLEF_ISA lowers it): a figure or a bug
                            // report means little without it.
                            isa = described.kernels.isa,
                            int8_isa = described.kernels.int8_isa,
                            matmul = described.matmul,
                            matmul_isa = described.kernels.matmul_isa(described.matmul),
                            chunk = described.chunk,
                            seconds = t0.elapsed().as_secs_f64(),
                            "model loaded; ready"
                        );
                        handle.install(model);
                    }
                    Ok(Err(e)) => {
                        let _ = failed_tx.send(e.to_string());
                    }
                    Err(e) => {
                        let _ = failed_tx.send(e.to_string());
                    }
                }
            });
            let shutdown = async move {
                tokio::select! {
                    _ = shutdown_signal() => {}
                    // A dropped sender (the model loaded) disables this branch.
                    Ok(message) = failed_rx => {
                        tracing::error!("loading the model failed: {message}");
                        if let Ok(mut slot) = load_error.lock() {
                            *slot = Some(message);
                        }
                    }
                }
            };
            server.run(shutdown).await
        }
    });
    // A computation whose client left holds its thread until its next chunk boundary; do not
    // wait for it without bound.
    runtime.shutdown_timeout(Duration::from_secs(5));
    outcome?;
    let failed = load_error.lock().ok().and_then(|mut s| s.take());
    match failed {
        Some(message) => Err(LaunchError::Load {
            dir: dir_for_error,
            message,
        }),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}
