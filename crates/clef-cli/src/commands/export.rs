//! `clef export --mlx BUNDLE OUT_DIR`: write a clef-ternary-v1 bundle as an MLX (mlx-lm)
//! folder: ternary weights as explicit 2-bit affine (scale s, bias −s, code t + 1), 4-bit
//! weights reinterpreted, CLoQ adapters as mlx-lm LoRA adapters (formats.md §3.8).

use clap::Args;
use clef_convert::ternary::mlx::export_mlx;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ExportArgs {
    /// Write an MLX folder (the only export target, so required).
    #[arg(long, required = true)]
    pub mlx: bool,
    /// The clef-ternary-v1 bundle to export.
    pub bundle: PathBuf,
    /// The folder to create.
    pub out: PathBuf,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    if !args.mlx {
        anyhow::bail!("choose an export target: --mlx");
    }
    let t0 = std::time::Instant::now();
    let r = export_mlx(&args.bundle, &args.out, args.force)?;
    eprintln!(
        "wrote {} in {:.1} s: {} 2-bit and {} 4-bit quantized tensors, {} adapters; model.safetensors {:.3} GB, adapters.safetensors {:.3} GB",
        args.out.display(),
        t0.elapsed().as_secs_f64(),
        r.quantized_2bit,
        r.quantized_4bit,
        r.adapters,
        r.model_bytes as f64 / 1e9,
        r.adapter_bytes as f64 / 1e9
    );
    Ok(ExitCode::SUCCESS)
}
