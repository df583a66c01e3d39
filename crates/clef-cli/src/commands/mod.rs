//! One module per subcommand; each exposes `XArgs` (clap) and `run(XArgs)`. `serve` is the
//! server crate's own command line (`clef_server::cli`), which the `clef-server` binary shares.

pub mod bench;
pub mod convert;
pub mod decide;
pub mod demo;
pub mod encode;
pub mod eval;
pub mod export;
pub mod inspect;
pub mod request_file;
pub mod synth;
pub mod verify;
