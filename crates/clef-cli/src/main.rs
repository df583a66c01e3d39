//! The `clef` command. Thin by design: argument parsing and wiring only; every
//! capability lives in a library crate so the server and tests reuse it.

use clap::{Parser, Subcommand};
use clef_engine::cli::{exit_code, WorkerThreads};
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
    #[command(flatten)]
    threads: WorkerThreads,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert a release folder into a bundle (f16, bf16, lut6, ternary, q8).
    Convert(commands::convert::ConvertArgs),
    /// Answer one request file with a model and print the System One response.
    Decide(commands::decide::DecideArgs),
    /// Answer example requests end to end on a built-in model (no download needed).
    Demo(commands::demo::DemoArgs),
    /// Print the token ids and spans of a request (debugging the prompt).
    Encode(commands::encode::EncodeArgs),
    /// Evaluate a model on records, against labels and/or a reference model.
    Eval(commands::eval::EvalArgs),
    /// Serve System One / Workers AI decision requests over HTTP.
    Serve(clef_server::cli::ServeArgs),
    /// Write a synthetic checkpoint (random weights, release layout) of a preset size.
    Synth(commands::synth::SynthArgs),
    /// Check a bundle's files against its manifest (sizes and SHA-256).
    Verify(commands::verify::VerifyArgs),
    /// Export a clef-ternary-v1 bundle for another runtime (`--mlx`: an MLX folder).
    Export(commands::export::ExportArgs),
    /// Show what a model folder holds; the ANE program plan and MIL texts of a LUT-6 bundle.
    Inspect(commands::inspect::InspectArgs),
    /// Measure prefill throughput, time per stage and peak memory on a model.
    Bench(commands::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One pool for every kernel; the server's async runtime never runs inference itself.
    let threads = match cli.threads.start() {
        Ok(threads) => threads,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(1);
        }
    };
    // An instruction set that cannot be honoured stops every command before it does any work.
    if let Err(err) = clef_engine::cli::instruction_set() {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    exit_code(match cli.command {
        Command::Convert(args) => commands::convert::run(args),
        Command::Decide(args) => commands::decide::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Encode(args) => commands::encode::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Serve(args) => clef_server::cli::run(args),
        Command::Synth(args) => commands::synth::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Bench(args) => commands::bench::run(args, threads),
    })
}
