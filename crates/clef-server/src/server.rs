//! Binding, serving and graceful shutdown.

use crate::config::{ConfigError, ServerConfig};
use crate::loaded::LoadedModel;
use crate::metrics::ClosedBy;
use crate::routes::router;
use crate::state::AppState;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
    ///
    /// The accept loop is ours rather than `axum::serve` because that one sets no timer:
    /// a client that opens connections and never finishes its headers would hold each one
    /// forever. Here every HTTP/1 connection must deliver a request head within
    /// `header_timeout` (idle keep-alive connections included), and at most
    /// `max_connections` are open at once: at the limit a new client takes the place of the
    /// connection that has waited longest for a request head (`connections.rs`), and when
    /// every connection is in a request, further clients wait in the kernel's backlog.
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
        let config = &self.state.config;
        let connections = self.state.connections.clone();
        // HTTP/1.1 only, and with hyper's HTTP/1 connection itself rather than the "auto" one:
        // that one sniffs for an HTTP/2 preface before any HTTP/1 timer runs (so a silent socket
        // was never closed) and answers h2c whatever it is told. Every connection now runs under
        // the header timer from its first byte (or its lack of one), and again after each
        // response (the idle keep-alive limit).
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_timeout);
        let app = router(self.state.clone());
        let graceful = GracefulShutdown::new();
        let mut signal = std::pin::pin!(signal);
        loop {
            // Accept only when the new connection will have a place: otherwise it waits in the
            // kernel's backlog, costing this process nothing.
            tokio::select! {
                _ = connections.room() => {}
                _ = &mut signal => break,
            }
            let tcp = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut signal => break,
            };
            // The room seen above may have been taken by a connection entering a request
            // since; then this one waits for the next.
            let connection = loop {
                if let Some(c) = connections.open() {
                    break Some(c);
                }
                tokio::select! {
                    _ = connections.room() => {}
                    _ = &mut signal => break None,
                }
            };
            let Some(mut connection) = connection else {
                break;
            };
            // Answers are one small write each; do not let Nagle hold them back.
            let _ = tcp.set_nodelay(true);
            // The router, with the connection marked as in a request while it handles one.
            let service = {
                let router = TowerToHyperService::new(app.clone());
                let activity = connection.activity();
                service_fn(move |req| {
                    let busy = activity.in_request();
                    let answer = router.call(req);
                    async move {
                        let resp = answer.await;
                        drop(busy);
                        resp
                    }
                })
            };
            let conn = builder.serve_connection(TokioIo::new(tcp), service);
            let conn = graceful.watch(conn);
            let state = self.state.clone();
            tokio::spawn(async move {
                tokio::select! {
                    ended = conn => {
                        if let Err(e) = ended {
                            count_connection_error(&state, &e);
                        }
                    }
                    _ = connection.evicted() => {
                        tracing::debug!("connection closed to make room for a new client");
                    }
                }
                drop(connection);
            });
        }
        drop(self.listener);
        graceful.shutdown().await;
        Ok(())
    }
}

/// Requests hyper refuses itself (a malformed request line or header, a head too large, a URI
/// too long) get its bodiless 400, 431 or 414 and never reach the router: count them under
/// the `malformed` route so that they show in `/metrics`. A head that did not arrive in time
/// is counted as closed by the header timer.
fn count_connection_error(state: &AppState, e: &hyper::Error) {
    if e.is_timeout() {
        state.metrics.count_closed(ClosedBy::HeaderTimeout);
    } else if e.is_parse() && !e.is_parse_version_h2() && !e.is_parse_status() {
        // hyper's own mapping (proto/h1/role.rs, `on_error`): too large is 431, except a URI
        // too long, 414; every other head error is 400.
        let status = if !e.is_parse_too_large() {
            400
        } else if e.to_string().contains("URI too long") {
            414
        } else {
            431
        };
        state.metrics.count_response(MALFORMED, status);
        tracing::info!(
            target: "clef_server::request",
            route = MALFORMED,
            status,
            error = %e,
            "malformed request refused by the HTTP parser"
        );
    } else {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// The route label of requests refused before they had a route.
pub const MALFORMED: &str = "malformed";

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
