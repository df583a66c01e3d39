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
    /// Worker threads of the command's parallel work: inference, conversion, hashing and
    /// checks (default: every core).
    #[arg(long, global = true, env = "CLEF_THREADS")]
    threads: Option<usize>,
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
    Serve(commands::serve::ServeArgs),
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
    let threads = cli
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // One pool for every kernel; the server's async runtime never runs inference itself.
    if let Err(err) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
    {
        eprintln!("error: could not start {threads} worker threads: {err}");
        return ExitCode::from(1);
    }
    // An instruction set that cannot be honoured stops every command before it does any work:
    // a mistyped or unavailable `CLEF_ISA` must not silently measure or serve another one.
    if let Err(err) = clef_kernels::Kernels::from_env() {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Convert(args) => commands::convert::run(args),
        Command::Decide(args) => commands::decide::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Encode(args) => commands::encode::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Synth(args) => commands::synth::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Bench(args) => commands::bench::run(args, threads),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            ExitCode::from(1)
        }
    }
}

/// An error and its causes, each cause added only when the message so far does not already
/// end with it: many errors print their source themselves (`path: os error`), and the user
/// should read it once.
fn error_chain(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that prints its source in its own message, as the model errors do.
    #[derive(Debug)]
    struct Embeds(std::io::Error);

    impl std::fmt::Display for Embeds {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "config.json: {}", self.0)
        }
    }

    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(Embeds(io()));
        assert_eq!(error_chain(&err), "config.json: No such file");
        let err = anyhow::Error::new(io()).context("reading the request");
        assert_eq!(error_chain(&err), "reading the request: No such file");
    }
}
