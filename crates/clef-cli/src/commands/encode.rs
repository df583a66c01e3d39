//! `clef encode`: owned by the encoding work (issue 2).

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct EncodeArgs {
    /// A tokenizer.json file, or a folder holding one.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// The System One request file.
    pub request: PathBuf,
}

pub fn run(_args: EncodeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("clef encode is being built")
}
