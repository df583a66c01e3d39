//! `clef-demo`: the README's first command. It takes no options (so it needs no argument
//! parser); `clef demo --synthetic PRESET` is the variant with a random-weight checkpoint.

use std::process::ExitCode;

const USAGE: &str = "\
usage: clef-demo
Answers three example requests (noul, choice, score) on nano, a toy model built into the binary.
It takes no options; for a random-weight synthetic checkpoint run
  cargo run --release -p clef-cli -- demo --synthetic tiny";

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprintln!("clef-demo: unexpected argument {other:?}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    // An unknown or unavailable `CLEF_ISA` is refused before any work, as by `clef`.
    if let Err(e) = clef_engine::instruction_set() {
        eprintln!("clef-demo: {e}");
        return ExitCode::from(2);
    }
    let mut out = std::io::stdout().lock();
    match clef_demo::run(clef_demo::DemoOptions::default(), &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clef-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
