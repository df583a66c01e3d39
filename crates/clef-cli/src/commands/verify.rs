//! `clef verify`: check every file of a bundle against its manifest (size and SHA-256) and
//! name each one that differs.

use clap::Args;
use clef_model::bundle::Manifest;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct VerifyArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let Some(m) = Manifest::load(&args.bundle)? else {
        anyhow::bail!(
            "{} has no manifest.json: not a bundle",
            args.bundle.display()
        );
    };
    let problems = m.check(&args.bundle, true);
    for p in &problems {
        println!("FAIL {p}");
    }
    for extra in m.unlisted(&args.bundle) {
        println!("note {extra}: not listed in the manifest (ignored when loading)");
    }
    if problems.is_empty() {
        println!(
            "OK {} files match the manifest ({} format)",
            m.files.len(),
            m.format
        );
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}
