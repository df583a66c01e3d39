//! The worker threads of any command.

use clap::Args;

/// `--threads`: the one pool every kernel runs on.
#[derive(Args, Clone, Copy)]
pub struct WorkerThreads {
    /// Worker threads of the command's parallel work: inference, conversion, hashing and
    /// checks (default: every core).
    #[arg(long, global = true, env = "CLEF_THREADS")]
    pub threads: Option<usize>,
}

impl WorkerThreads {
    /// Start the global pool with the threads asked for (every core by default); returns how
    /// many. The server's async runtime never runs inference itself: its requests call into
    /// this pool.
    pub fn start(self) -> Result<usize, String> {
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .map_err(|err| format!("could not start {threads} worker threads: {err}"))?;
        Ok(threads)
    }
}
