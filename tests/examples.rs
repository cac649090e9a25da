//! Every example runs (they check their own results against the reference).

mod common;

#[path = "../examples/sentence.rs"]
mod sentence;

#[path = "../examples/decode.rs"]
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
    decode::main().expect("decode example");
}
