//! The tensor-core tier's hardware kernels index their arrays of cooperative matrices (the
//! output accumulators, the blocks of Q held across the key loop, the score accumulators,
//! the blocks of P) only with counters of loops whose bounds are constants once a
//! pipeline's overrides are written in, so that a driver can unroll those loops fully and
//! keep the arrays in registers: an array of matrices indexed at run time would go to
//! memory, on every multiply-add (src/fused/coop/fused_coop.wgsl, where acc_rows is
//! computed, says how the kernel keeps it so). Nothing on lavapipe would show a kernel that
//! lost this: its emulated operations hold no cooperative matrices, and the result is the
//! same either way.

use naga::{Block, Expression, Function, Handle, LocalVariable, Module, Statement, TypeInner};
use std::collections::HashMap;
use wgpu_attention::fused::coop::{Layout, Variant};
use wgpu_attention::kernel::PipelineKey;

/// For each local variable that counts a loop: whether the loop's bound is a constant.
/// A `for` loop is, in naga's IR, a loop whose body opens with `if (cond) {} else { break; }`
/// (after the statements that evaluate `cond`); the counter is the variable `cond` loads
/// and compares with `<`.
fn loop_counters(f: &Function, block: &Block, out: &mut HashMap<Handle<LocalVariable>, bool>) {
    for statement in block.iter() {
        match statement {
            Statement::Loop {
                body, continuing, ..
            } => {
                let test = body.iter().find_map(|s| match s {
                    Statement::If {
                        condition,
                        accept,
                        reject,
                    } if accept.is_empty()
                        && reject.len() == 1
                        && matches!(reject.iter().next(), Some(Statement::Break)) =>
                    {
                        Some(*condition)
                    }
                    _ => None,
                });
                if let Some(Expression::Binary {
                    op: naga::BinaryOperator::Less,
                    left,
                    right,
                }) = test.map(|c| &f.expressions[c])
                {
                    if let Expression::Load { pointer } = f.expressions[*left] {
                        if let Expression::LocalVariable(counter) = f.expressions[pointer] {
                            let constant = matches!(
                                f.expressions[*right],
                                Expression::Literal(_) | Expression::Constant(_)
                            );
                            out.insert(counter, constant);
                        }
                    }
                }
                loop_counters(f, body, out);
                loop_counters(f, continuing, out);
            }
            Statement::Block(inner) => loop_counters(f, inner, out),
            Statement::If { accept, reject, .. } => {
                loop_counters(f, accept, out);
                loop_counters(f, reject, out);
            }
            Statement::Switch { cases, .. } => {
                for case in cases {
                    loop_counters(f, &case.body, out);
                }
            }
            _ => {}
        }
    }
}

/// The local variables whose values `e` depends on. Panics on an expression it does not
/// know, so that a form of index it has not been taught fails the test rather than
/// passing it.
fn locals_read(f: &Function, e: Handle<Expression>, out: &mut Vec<Handle<LocalVariable>>) {
    match f.expressions[e] {
        Expression::Literal(_) | Expression::Constant(_) | Expression::ZeroValue(_) => {}
        Expression::FunctionArgument(_) | Expression::GlobalVariable(_) => {}
        Expression::LocalVariable(v) => out.push(v),
        Expression::Load { pointer } => locals_read(f, pointer, out),
        Expression::Binary { left, right, .. } => {
            locals_read(f, left, out);
            locals_read(f, right, out);
        }
        Expression::Unary { expr, .. } | Expression::As { expr, .. } => locals_read(f, expr, out),
        Expression::Math {
            arg,
            arg1,
            arg2,
            arg3,
            ..
        } => {
            for a in [Some(arg), arg1, arg2, arg3].into_iter().flatten() {
                locals_read(f, a, out);
            }
        }
        Expression::Select {
            condition,
            accept,
            reject,
        } => {
            for a in [condition, accept, reject] {
                locals_read(f, a, out);
            }
        }
        ref other => panic!("an index of a form this test does not know: {other:?}"),
    }
}

/// Whether `ty` is an array of cooperative matrices, or of structs of them (Metal's form
/// holds a 16x16 block as four 8x8 matrices).
fn matrix_array(module: &Module, ty: Handle<naga::Type>) -> bool {
    let matrix = |t: Handle<naga::Type>| {
        matches!(module.types[t].inner, TypeInner::CooperativeMatrix { .. })
    };
    match module.types[ty].inner {
        TypeInner::Array { base, .. } => match module.types[base].inner {
            TypeInner::Struct { ref members, .. } => members.iter().all(|m| matrix(m.ty)),
            _ => matrix(base),
        },
        _ => false,
    }
}

/// How many indexings of arrays of cooperative matrices `main` of `module` holds; panics,
/// naming `what`, at one indexed by anything but counters of loops with constant bounds.
fn check_indices(module: &Module, what: &str) -> usize {
    let main = &module
        .entry_points
        .iter()
        .find(|e| e.name == "main")
        .unwrap_or_else(|| panic!("{what}: no main"))
        .function;
    let mut counters = HashMap::new();
    loop_counters(main, &main.body, &mut counters);
    let mut checked = 0;
    for (_, e) in main.expressions.iter() {
        let Expression::Access { base, index } = *e else {
            continue;
        };
        let Expression::LocalVariable(array) = main.expressions[base] else {
            continue;
        };
        if !matrix_array(module, main.local_variables[array].ty) {
            continue;
        }
        let name = main.local_variables[array].name.as_deref().unwrap_or("?");
        let mut read = Vec::new();
        locals_read(main, index, &mut read);
        for v in read {
            let counter = main.local_variables[v].name.as_deref().unwrap_or("?");
            match counters.get(&v) {
                Some(true) => {}
                Some(false) => panic!(
                    "{what}: {name} is indexed by {counter}, whose loop's bound is not a constant"
                ),
                None => panic!("{what}: {name} is indexed by {counter}, which counts no loop"),
            }
        }
        checked += 1;
    }
    checked
}

/// `module` with `constants` written in for the pipeline of `entry_point`, checked by
/// [`check_indices`], which must find more than a handful of indexings wherever it found
/// the arrays at all (accs initialised, rescaled, multiplied into and written; qts loaded
/// and read; sacc zeroed, multiplied into and stored; pts and lts).
fn check_specialised(
    module: &Module,
    info: &naga::valid::ModuleInfo,
    (entry_point, constants): (&str, &[(&str, u32)]),
    what: &str,
) {
    let mut pc = naga::back::PipelineConstants::default();
    for (name, value) in constants {
        pc.insert((*name).to_string(), f64::from(*value));
    }
    let stage = Some((naga::ShaderStage::Compute, entry_point));
    let (module, _) = naga::back::pipeline_constants::process_overrides(module, info, stage, &pc)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let checked = check_indices(&module, what);
    assert!(checked >= 8, "{what}: only {checked} indexings found");
}

#[test]
fn coop_arrays_are_indexed_by_loops_of_constant_bounds() {
    for v in Variant::ALL {
        for f16 in [false, true] {
            let kernel = v.kernel(f16, false);
            // Every layout a GPU may run: the subgroup sizes, the weights in one part or
            // two, score and output tiles of one row of blocks or two, the prefetch.
            for (lanes, split, score_rows, out_rows, prefetch) in [
                (32, true, 2, 2, 0),
                (32, false, 1, 1, 1),
                (32, true, 2, 1, 1),
                (16, true, 2, 2, 0),
                (64, false, 2, 2, 0),
                (64, true, 1, 1, 1),
            ] {
                let Some(dv) = super::widest_dv(v, lanes) else {
                    continue;
                };
                let sizes = v.array_sizes(v.width, dv, lanes, Layout { split, score_rows });
                let key = PipelineKey {
                    kernel,
                    constants: vec![],
                    sizes: sizes.to_vec(),
                };
                let what = format!(
                    "{} at {lanes} lanes, SPLIT_P {split}, SCORE_ROWS {score_rows}, OUT_ROWS \
                     {out_rows}, PREFETCH {prefetch}",
                    kernel.label()
                );
                let (module, info) = super::validated(&key.source(), &what);
                let constants = [
                    ("D", v.width as u32),
                    ("DV", dv as u32),
                    ("SG", lanes),
                    ("SCORE_ROWS", score_rows),
                    ("OUT_ROWS", out_rows),
                    ("PREFETCH", prefetch),
                ];
                check_specialised(&module, &info, (kernel.entry_point(), &constants), &what);
            }
        }
    }
    // Metal's 8x8 form (simdgroup matrices), as its source declares it.
    let kernel = wgpu_attention::fused::coop::kernels::COOP_16X64_SIMD8;
    let (module, info) = super::module(kernel);
    let constants = [("D", 64), ("DV", 64), ("SG", 32)];
    check_specialised(
        &module,
        &info,
        (kernel.entry_point(), &constants),
        kernel.label(),
    );
}
