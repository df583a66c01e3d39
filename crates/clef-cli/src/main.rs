//! The `clef` command. Thin by design: argument parsing and wiring only; every
//! capability lives in a library crate so the server and tests reuse it.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod commands;

#[derive(Parser)]
#[command(
    name = "clef",
    version,
    about = "Engine, converter and server for Cloudflare's Clef decision models",
    long_about = "clef answers System One decision requests (text, JSON, images, video) with \
                  Clef and Clef-Flash checkpoints, converts them to compact bundles, serves them \
                  over HTTP and evaluates conversions against their source."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the token ids and spans of a request (debugging the prompt).
    Encode(commands::encode::EncodeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Encode(args) => commands::encode::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}
