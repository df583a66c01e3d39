//! `clef serve`: the System One / Workers AI decision protocol over HTTP (spec/api.md).
//!
//! The server binds first and loads the model in the background, so `/healthz` answers at
//! once and `/readyz` (and `/health`) turn to 200 when the model is in memory. Decision
//! requests take a place in a bounded queue before their body is read (429 when full), read
//! their body under a byte limit, a server-wide byte budget and a pace, are parsed and
//! validated on the blocking pool, and are computed on a dedicated blocking thread that calls
//! into the engine's rayon pool; the async runtime's own threads never run inference. A
//! request whose deadline passes or whose client goes away is stopped at the next prefill
//! chunk boundary.
//!
//! ```text
//! Server::bind(config) ─► print local_addr ─► load_model(..) on a blocking thread
//!                         └─► handle.install(model) ─► Server::run(shutdown_signal())
//! ```

pub mod admission;
pub mod auth;
pub mod body;
pub mod body_budget;
pub mod cli;
pub mod config;
pub mod connections;
pub mod decide;
pub mod failures;
pub mod headers;
pub mod launch;
pub mod loaded;
pub mod metrics;
pub mod middleware;
pub mod models;
pub mod names;
pub mod openapi;
pub mod pipeline;
pub mod reply;
pub mod request_id;
pub mod routes;
pub mod server;
pub mod state;

pub use clef_engine::Revision;
pub use config::{ConfigError, ServerConfig};
pub use failures::api_error;
pub use launch::{serve_blocking, Launch, LaunchError};
pub use loaded::{load_model, LoadedModel, ModelLoadError};
pub use names::{NameError, NameOptions, ServedNames};
pub use pipeline::Shape;
pub use routes::router;
pub use server::{shutdown_signal, Server, ServerError, ServerHandle};
pub use state::AppState;
