//! Support shared by the workspace's test suites, so that a test never passes without checking
//! what it claims:
//!
//! - [`tools`]: an external program a test needs (ffmpeg, ffprobe, a browser) is either there,
//!   or the test fails under CI naming it, or (outside CI) the test is skipped visibly: a line
//!   on stderr and one in the skip log that `.ci/run` counts.
//! - [`fixtures`]: the committed reference fixtures and their golden records.
//! - [`isa`]: the instruction set a golden suite runs under is the one `CLEF_ISA` asked for,
//!   so a loop over ISAs cannot silently test the best one every time.

pub mod fixtures;
pub mod isa;
pub mod tools;
