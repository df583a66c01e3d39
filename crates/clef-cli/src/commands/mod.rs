//! One module per subcommand; each exposes `XArgs` (clap) and `run(XArgs)`.

pub mod encode;
