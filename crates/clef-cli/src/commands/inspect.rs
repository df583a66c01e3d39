//! `clef inspect`: what a model folder holds and, for the Clef-ANE-LUT6 artifact, the partition
//! of the text layers into Neural Engine programs (`--ane-plan`) and the MIL program texts with
//! their weight blobs (`--emit-mil`).

use clap::Args;
use clef_ane::mil::{check_bundle_programs, emit_all};
use clef_ane::plan::{ProgramKind, CONTEXT_BUCKETS};
use clef_ane::programs::{plan_for, ProgramsFile};
use clef_ane::{Part, TensorsFile, FORMAT, WEIGHT_BIN};
use clef_model::bundle::Manifest;
use clef_model::ModelConfig;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct InspectArgs {
    /// A bundle or release folder, or a GGUF file.
    pub bundle: PathBuf,
    /// List every tensor of a GGUF file (name, type, shape) after the summary.
    #[arg(long)]
    pub tensors: bool,
    /// Print the ANE program partition (from the bundle's programs.json, or derived from the
    /// config of any Clef folder).
    #[arg(long)]
    pub ane_plan: bool,
    /// Write the MIL program texts, programs.json and weights/weight.bin (a hard link when
    /// possible, else a copy) of a LUT-6 bundle into this folder, checking every blob reference.
    #[arg(long)]
    pub emit_mil: Option<PathBuf>,
}

fn is_lut6(m: &Option<Manifest>) -> bool {
    matches!(m, Some(m) if m.format == FORMAT.name())
}

fn gib(b: u64) -> String {
    format!("{:.3} GiB", b as f64 / (1u64 << 30) as f64)
}

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.bundle;
    if dir.is_file() {
        gguf_summary(dir, args.tensors)?;
        return Ok(ExitCode::SUCCESS);
    }
    let manifest = Manifest::load(dir)?;
    let config = ModelConfig::from_file(&dir.join("config.json"))?;
    summary(dir, &manifest, &config)?;
    if args.ane_plan {
        print_plan(dir, &manifest, &config)?;
    }
    if let Some(out) = &args.emit_mil {
        if !is_lut6(&manifest) {
            anyhow::bail!("--emit-mil needs a LUT-6 bundle ({FORMAT})");
        }
        emit(dir, &config, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn summary(dir: &Path, manifest: &Option<Manifest>, cfg: &ModelConfig) -> anyhow::Result<()> {
    let t = &cfg.text_config;
    match manifest {
        Some(m) => println!(
            "{}: bundle, format {} (v{}), {} files, {}",
            dir.display(),
            m.format,
            m.format_version,
            m.files.len(),
            gib(m.files.iter().map(|f| f.bytes).sum())
        ),
        None => println!("{}: release folder (no manifest)", dir.display()),
    }
    println!(
        "text: {} layers, hidden {}, intermediate {}; vision: {}",
        t.num_hidden_layers,
        t.hidden_size,
        t.intermediate_size,
        cfg.vision_config
            .as_ref()
            .map_or("none".to_string(), |v| format!("{} blocks", v.depth))
    );
    if is_lut6(manifest) {
        let tensors = TensorsFile::load(dir)?;
        let lut = tensors
            .tensors
            .iter()
            .filter(|e| e.stored.name() == "lut6")
            .count();
        println!(
            "text tensors in {WEIGHT_BIN}: {} LUT-6, {} FP16",
            lut,
            tensors.tensors.len() - lut
        );
        if let Some(m) = manifest {
            for f in &m.files {
                if f.bytes >= 1 << 20 {
                    println!("  {:<40} {:>14} bytes", f.path, f.bytes);
                }
            }
        }
    }
    Ok(())
}

/// A GGUF file: what it is, the model it holds as clef.rs reads it, its tensor types (count and
/// bytes of each) and, with `--tensors`, every tensor.
fn gguf_summary(path: &Path, list: bool) -> anyhow::Result<()> {
    let bytes = std::fs::File::open(path)?;
    // SAFETY: read-only map of a file this command only reads.
    let map = unsafe { memmap2::Mmap::map(&bytes)? };
    let g = clef_gguf::read(&map).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let arch = g.metadata.string("general.architecture").unwrap_or("?");
    println!(
        "{}: GGUF v{}, architecture {arch}, {} tensors, {} metadata entries, {}",
        path.display(),
        g.version,
        g.tensors.len(),
        g.metadata.len(),
        gib(map.len() as u64)
    );
    let mut types: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for t in &g.tensors {
        let e = types.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.bytes;
    }
    for (ty, (n, b)) in &types {
        let read = clef_gguf::GgmlType::ALL
            .iter()
            .find(|t| t.name() == *ty)
            .is_some_and(|t| t.is_supported());
        let note = if read { "" } else { "  (not read by clef.rs)" };
        println!("  {ty:<8} {n:>5} tensors {:>16} bytes{note}", b);
    }
    match clef_model::checkpoint::gguf::open(path) {
        Ok(ck) => {
            let t = &ck.config.text_config;
            println!(
                "text: {} layers, hidden {}, intermediate {}, vocabulary {}; head: width {}, {} \
                 routing + {} joint layers; vision: none (--vision DIR adds a release's)",
                t.num_hidden_layers,
                t.hidden_size,
                t.intermediate_size,
                t.vocab_size,
                ck.head_config.width,
                ck.head_config.routing_layers,
                ck.head_config.layers
            );
        }
        Err(e) => println!("not loadable by clef.rs: {e}"),
    }
    if list {
        for t in &g.tensors {
            println!("  {:<48} {:<8} {:?}", t.name, t.ty.name(), t.shape());
        }
    }
    Ok(())
}

fn part_name(p: Part) -> &'static str {
    match p {
        Part::Deltanet => "DeltaNet",
        Part::Attention => "attention",
        Part::Mlp => "MLP",
    }
}

fn print_plan(dir: &Path, manifest: &Option<Manifest>, cfg: &ModelConfig) -> anyhow::Result<()> {
    let file = if is_lut6(manifest) {
        ProgramsFile::load(dir)?
    } else {
        let plan = plan_for(cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
        let layers = cfg.text_config.num_hidden_layers;
        ProgramsFile::build(cfg, &plan, vec![1.0; layers], "not converted".into())
    };
    let count = |k: ProgramKind| file.programs.iter().filter(|p| p.program.kind == k).count();
    let attention = count(ProgramKind::Attention);
    println!();
    println!(
        "ANE program plan: {} text programs = {} DeltaNet runs + {} attention ({} layers × {} contexts {:?}) + {} MLP",
        file.text_programs,
        count(ProgramKind::Deltanet),
        attention,
        attention / CONTEXT_BUCKETS.len(),
        CONTEXT_BUCKETS.len(),
        file.context_buckets,
        count(ProgramKind::Mlp)
    );
    println!(
        "{} text + {} vision = {} of the ANE's {} resident programs; {}-token calls, {} calls per chunk, contexts up to {} tokens",
        file.text_programs,
        file.vision_programs,
        file.text_programs + file.vision_programs,
        file.program_limit,
        file.chunk_tokens,
        file.calls_per_chunk,
        file.max_context
    );
    println!(
        "activation scales: attention probabilities ×{}; MLP down-projection input {}",
        file.attention_probability_scale, file.down_scale_source
    );
    println!();
    println!(
        "{:>4}  {:<22} {:<10} {:>7}  {:<28} steps",
        "#", "file", "kind", "context", "layers"
    );
    for p in &file.programs {
        let steps: Vec<String> = p
            .program
            .steps
            .iter()
            .map(|s| format!("{} {}", part_name(s.part), s.layer))
            .collect();
        let scales: Vec<String> = p
            .down_scales
            .iter()
            .filter(|d| d.scale != 1.0)
            .map(|d| format!("s{}={}", d.layer, d.scale))
            .collect();
        println!(
            "{:>4}  {:<22} {:<10} {:>7}  {:<28} {}{}",
            p.program.index,
            p.program.file_name(),
            p.program.kind.name(),
            p.program.context.map_or("-".into(), |c| c.to_string()),
            format!("{:?}", p.layers),
            steps.join(", "),
            if scales.is_empty() {
                String::new()
            } else {
                format!(" [{}]", scales.join(" "))
            }
        );
    }
    Ok(())
}

fn emit(dir: &Path, cfg: &ModelConfig, out: &Path) -> anyhow::Result<()> {
    let tensors = TensorsFile::load(dir)?;
    let programs = ProgramsFile::load(dir)?;
    let texts = emit_all(cfg, &tensors, &programs)?;
    let weights_src = dir.join(WEIGHT_BIN);
    // checked before anything is written
    let (refs, blobs) = check_bundle_programs(dir, &texts).map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::create_dir_all(out.join("programs"))?;
    std::fs::create_dir_all(out.join("weights"))?;
    for (path, text) in &texts {
        let name = Path::new(path)
            .file_name()
            .ok_or_else(|| anyhow::anyhow!("bad program path {path}"))?;
        std::fs::write(out.join("programs").join(name), text)?;
    }
    std::fs::write(
        out.join("programs.json"),
        serde_json::to_string_pretty(&programs)?,
    )?;
    let dst = out.join("weights").join("weight.bin");
    if dst.exists() {
        std::fs::remove_file(&dst)?;
    }
    if std::fs::hard_link(&weights_src, &dst).is_err() {
        std::fs::copy(&weights_src, &dst)?;
    }
    println!(
        "wrote {} MIL programs to {} ({} blob references checked against weights/weight.bin, {} blobs)",
        texts.len(),
        out.join("programs").display(),
        refs,
        blobs
    );
    Ok(())
}
