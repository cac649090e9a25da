//! The three examples that check their own results against the reference (sentence, decode,
//! tiny_transformer) run; the others (timing and fuzzing tools) are only built, by clippy.

use crate::common;

#[path = "../../examples/sentence.rs"]
mod sentence;

// `main` parses the command line; the test calls `run` with the defaults.
#[allow(dead_code)]
#[path = "../../examples/decode.rs"]
mod decode;

#[test]
fn sentence_example_runs() {
    if common::ctx().is_none() {
        return;
    }
    sentence::main().expect("sentence example");
}

#[test]
fn decode_example_runs() {
    if common::ctx().is_none() {
        return;
    }
    decode::run(8, 2, 64, 300).expect("decode example");
}

#[path = "../../examples/tiny_transformer.rs"]
mod tiny_transformer;

#[test]
fn tiny_transformer_example_runs() {
    if common::ctx().is_none() {
        return;
    }
    tiny_transformer::main().expect("tiny transformer example");
}
