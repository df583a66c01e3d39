//! The server's command line: its settings as flags and environment variables, the same for
//! `clef serve` (which takes [`ServeArgs`] as its subcommand) and the `clef-server` binary.
//! Binds first and prints `listening on ADDR` on stdout, then loads the model in the background
//! (`/readyz` turns 200 when it is loaded).

use crate::{serve_blocking, Launch, NameOptions, ServerConfig};
use clap::{Args, ValueEnum};
use clef_api::{Limits, Profile};
use clef_engine::cli::{EngineArgs, OutputArgs};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
#[command(after_long_help = SERVE_HELP)]
pub struct ServeArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Address to listen on. The default is loopback only; use 0.0.0.0:8080 to accept
    /// connections from other machines (and set --api-key). Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", env = "CLEF_ADDR")]
    pub addr: SocketAddr,
    /// Request rules: `workers` (the hosted service's limits) or `reference` (what the
    /// reference code accepts: 1 option, missing instructions, any question id).
    #[arg(long, default_value_t = Profile::Workers, env = "CLEF_PROFILE")]
    pub profile: Profile,
    /// Refuse the `videos` extension (it becomes an unknown field, 422).
    #[arg(long, env = "CLEF_NO_VIDEO")]
    pub no_video: bool,
    /// The model's primary name (default: `clef` for a 27B config, `clef-flash` for a 9B
    /// config, else the folder name). A request's `model` must be this name or an alias.
    #[arg(long, env = "CLEF_MODEL_NAME")]
    pub model_name: Option<String>,
    /// Another name the model answers to (repeatable; comma separated in the environment).
    /// Default when none is given: both `clef` and `clef-flash`, so clients written for
    /// either hosted model work unchanged.
    #[arg(long = "alias", value_delimiter = ',', env = "CLEF_ALIASES")]
    pub aliases: Vec<String>,
    /// Serve only the primary name (no aliases, not even the defaults).
    #[arg(long, conflicts_with = "aliases", env = "CLEF_NO_ALIASES")]
    pub no_aliases: bool,
    /// Require `Authorization: Bearer KEY` on every route except /healthz, /readyz, /health
    /// and /openapi.json (401, code 10000 otherwise). Prefer the environment variable, which
    /// does not show in the process list.
    #[arg(long, env = "CLEF_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Largest request body in bytes (413, code 5021 above it). The default, 13 MiB, holds
    /// four images within the 8 MiB decoded-image limit plus the state.
    #[arg(long, default_value_t = crate::config::DEFAULT_MAX_BODY_BYTES, env = "CLEF_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// Requests computed at the same time. Each already uses every inference thread, so 1
    /// (the default) gives the best latency; more only helps overlap media decoding.
    #[arg(long, default_value_t = 1, env = "CLEF_CONCURRENCY")]
    pub concurrency: usize,
    /// Requests that may wait for a computing slot; when it is full, 429 (code 3040) with
    /// Retry-After.
    #[arg(long, default_value_t = 16, env = "CLEF_QUEUE_DEPTH")]
    pub queue_depth: usize,
    /// Seconds from a request's arrival to its answer, queueing included; past it, 408 (code
    /// 3007) and the engine stops the request at its next check (every 128-token chunk, media
    /// step, JPEG scan and vision block).
    #[arg(long, default_value_t = 600.0, env = "CLEF_DEADLINE")]
    pub deadline: f64,
    /// Cut the state to fit the context for every request instead of refusing with 413 (a
    /// single request can ask with the header `x-clef-truncate: state`). Dropped tokens are
    /// reported in `x-clef-truncated-state-tokens`.
    #[arg(long, env = "CLEF_TRUNCATE_STATE")]
    pub truncate_state: bool,
    /// Seconds a connection may take to send a request's headers; also how long an idle
    /// keep-alive connection stays open. Slow or silent clients are disconnected.
    #[arg(long, default_value_t = 30.0, env = "CLEF_HEADER_TIMEOUT")]
    pub header_timeout: f64,
    /// Connections open at once. At the limit, a new client takes the place of the
    /// connection that has waited longest for a request head (silent, slow or idle); when
    /// every connection is in a request, new clients wait in the listen backlog.
    #[arg(long, default_value_t = 1024, env = "CLEF_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Seconds a request body may take to start arriving, and the base of its allowance;
    /// each --min-body-rate bytes received add one second. A body that falls behind is
    /// refused with 408 (code 3007) and frees its place in the queue.
    #[arg(long, default_value_t = 10.0, env = "CLEF_BODY_TIMEOUT")]
    pub body_timeout: f64,
    /// Bytes per second a request body must keep up after --body-timeout (0: the timeout
    /// bounds the whole body). The default, 65536, is about half a megabit a second.
    #[arg(long, default_value_t = crate::config::DEFAULT_MIN_BODY_RATE, env = "CLEF_MIN_BODY_RATE")]
    pub min_body_rate: u64,
    /// MiB of request bodies held in memory at once by all connections together; a body
    /// that does not fit now is refused with 429 before it is read. Must hold one body of
    /// --max-body-bytes.
    #[arg(long, default_value_t = crate::config::DEFAULT_BODY_BUDGET_BYTES >> 20, env = "CLEF_BODY_BUDGET_MIB")]
    pub body_budget_mib: usize,
    /// Seconds sent in Retry-After on 429 and 503.
    #[arg(long, default_value_t = 1, env = "CLEF_RETRY_AFTER")]
    pub retry_after: u64,
    /// Log format on stderr: `text` or `json` (one object per line). The level comes from
    /// CLEF_LOG or RUST_LOG (default `info`: one line per request with timings and tokens).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "CLEF_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Threads of the async runtime (network only; inference runs on the --threads pool).
    #[arg(long, default_value_t = 2, env = "CLEF_IO_THREADS")]
    pub io_threads: usize,
}

const SERVE_HELP: &str = "\
Routes:
  POST /v1/systemone                                           System One request, bare response
  POST /client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}   Workers AI envelope
  POST /ai/run/@cf/cloudflare/{model}                          Workers AI envelope (short path)
  GET  /client/v4/accounts/{account}/ai/models/schema?model=@cf/cloudflare/{model}
                                                               request/response JSON schemas
  GET  /v1/models   /healthz   /readyz   /health   /metrics   /openapi.json
The Workers paths also accept the model percent-encoded (@cf%2Fcloudflare%2F{model}, as the
official SDKs send it) and a body without \"model\" (the URL's model answers).

Request headers: x-clef-truncate: state (cut the state instead of 413), x-clef-precision: full
(unrounded numbers), cf-ai-req-id or x-request-id (echoed back).

Example (tests/fixtures/models/nano is a trained toy model committed in the repository):
  clef serve --model tests/fixtures/models/nano &
  curl -s localhost:8080/v1/systemone -H 'content-type: application/json' -d '{\"model\": \"clef\",
    \"state\": \"Checkout fails for every customer.\",
    \"questions\": {\"urgent\": {\"type\": \"noul\", \"instructions\": \"Is this urgent?\"}}}'

SIGINT or SIGTERM stops accepting connections and finishes the requests in flight.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("CLEF_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // A second subscriber (tests calling run twice) is not an error worth stopping for.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

impl ServeArgs {
    fn server_config(&self) -> anyhow::Result<ServerConfig> {
        if !(self.deadline.is_finite() && self.deadline > 0.0 && self.deadline <= 1e9) {
            anyhow::bail!("--deadline must be a positive number of seconds");
        }
        if !(self.header_timeout.is_finite()
            && self.header_timeout > 0.0
            && self.header_timeout <= 1e6)
        {
            anyhow::bail!("--header-timeout must be a positive number of seconds");
        }
        if !(self.body_timeout.is_finite() && self.body_timeout > 0.0 && self.body_timeout <= 1e6) {
            anyhow::bail!("--body-timeout must be a positive number of seconds");
        }
        if self.io_threads == 0 {
            anyhow::bail!("--io-threads must be at least 1");
        }
        let config = ServerConfig {
            addr: self.addr,
            max_body_bytes: self.max_body_bytes,
            concurrency: self.concurrency,
            queue_depth: self.queue_depth,
            deadline: Duration::from_secs_f64(self.deadline),
            api_key: self.api_key.clone(),
            truncate_state: self.truncate_state,
            answer: self.output.answer_options(),
            retry_after_s: self.retry_after,
            header_timeout: Duration::from_secs_f64(self.header_timeout),
            max_connections: self.max_connections,
            body_timeout: Duration::from_secs_f64(self.body_timeout),
            min_body_rate: self.min_body_rate,
            body_budget_bytes: self.body_budget_mib.saturating_mul(1 << 20),
            ..Default::default()
        };
        config.validate()?;
        Ok(config)
    }

    fn names(&self) -> NameOptions {
        // `CLEF_ALIASES=` (empty) or a trailing comma means "no alias given", not a blank name.
        let aliases: Vec<String> = self
            .aliases
            .iter()
            .filter(|a| !a.trim().is_empty())
            .cloned()
            .collect();
        NameOptions {
            model_name: self.model_name.clone(),
            aliases: if self.no_aliases {
                Some(vec![])
            } else if aliases.is_empty() {
                None
            } else {
                Some(aliases)
            },
        }
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging(args.log_format);
    let config = args.server_config()?;
    let mut limits = Limits::for_profile(args.profile);
    limits.max_body_bytes = config.max_body_bytes;
    limits.videos_enabled = !args.no_video;
    let engine = args.engine.config(limits)?;
    serve_blocking(Launch {
        config,
        model_dir: args.engine.model.clone(),
        engine,
        names: args.names(),
        io_threads: args.io_threads,
        on_listening: Box::new(|addr| {
            // Tests and scripts read the bound address (port 0 picks one) from this line.
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        }),
    })?;
    Ok(ExitCode::SUCCESS)
}
