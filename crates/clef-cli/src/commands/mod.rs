//! One module per subcommand; each exposes `XArgs` (clap) and `run(XArgs)`.

pub mod bench;
pub mod convert;
pub mod decide;
pub mod demo;
pub mod encode;
pub mod eval;
pub mod export;
pub mod inspect;
pub mod request_file;
pub mod serve;
pub mod settings;
pub mod synth;
pub mod verify;
