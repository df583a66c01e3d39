//! What the commands that run a model share on the command line (feature `cli`): the engine's
//! and the answers' options, the worker threads, and how a command's failure is printed. Here,
//! beside the engine they configure, so that the `clef` command and the `clef-server` binary
//! take the same flags and environment variables and print the same errors, without the server
//! depending on the CLI.

mod options;
mod outcome;
mod threads;

pub use crate::engine::instruction_set;
pub use options::{
    check_model_folder, ActivationsArg, Confidence, EngineArgs, MatmulArg, MatmulArgs, OutputArgs,
    Rounding,
};
pub use outcome::{error_chain, exit_code};
pub use threads::WorkerThreads;
