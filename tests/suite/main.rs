//! The test suite, as one test binary: every module below was a test binary of its own until
//! 2026-12-04. Sharing one process shares one GPU context (`common::ctx`) and its pipelines:
//! on lavapipe a pipeline costs seconds to create even when Mesa's disk cache holds its
//! machine code (the driver still translates and optimises the shader), and 21 processes
//! created the same pipelines over and over, besides linking 21 large binaries
//! (docs/testing.md, "Where the time goes"). Run one module with a filter:
//! `REQUIRE_GPU=1 cargo test --test suite cache::`. tests/lanes16.rs stays a binary of its
//! own: it sets lavapipe's vector width before its first context, once per process.

mod common;

mod broadcast;
mod cache;
// Runs the binary, which needs the `cli` feature (a default one).
#[cfg(feature = "cli")]
mod cli;
mod concurrency;
mod coop;
mod decode;
mod decode_properties;
mod errors;
mod examples;
mod f16;
mod fused;
mod limits;
mod loops;
mod memory;
mod mha;
mod npy;
mod parity;
mod profiles;
mod properties;
mod reference;
mod shaders;
mod timing;
mod zero_size;
