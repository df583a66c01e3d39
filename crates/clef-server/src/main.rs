//! `clef-server`: the HTTP server alone, built without the converter, the quantizers or the
//! linear algebra they need (what a container image ships). Its flags, environment variables
//! and help are those of `clef serve`, from the same [`ServeArgs`].

use clap::Parser;
use clef_engine::cli::{exit_code, instruction_set, WorkerThreads};
use clef_server::cli::{run, ServeArgs};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "clef-server",
    version,
    about = "Serve System One / Workers AI decision requests over HTTP (what `clef serve` runs)"
)]
struct Cli {
    #[command(flatten)]
    threads: WorkerThreads,
    #[command(flatten)]
    serve: ServeArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = cli.threads.start() {
        eprintln!("error: {err}");
        return ExitCode::from(1);
    }
    if let Err(err) = instruction_set() {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    exit_code(run(cli.serve))
}
