//! `wgpu-attention heatmap`: attention weights computed on the GPU, drawn as a PNG.

use ndarray::{ArrayD, Axis, Ix2, IxDyn};
use wgpu_attention::heatmap::{render_panels, Panel};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::{AttentionOptions, Context};

use super::values::CausalArg;
use super::Failure;
use wgpu_attention::seeds::{sentence, SENTENCES};
use wgpu_attention::Causal;

/// `heatmap --help`'s description.
pub const LONG_ABOUT: &str = "\
Attention weights computed on the GPU, drawn as a PNG: token labels on both axes, the value \
in each cell when cells are large enough, a colour bar, and a title with the adapter; one \
panel per head (and batch) for inputs of rank 3 and more.

Either --demo, or --q and --k (float32, float64 or float16 .npy, rank 2 to 8).";

/// `wgpu-attention heatmap`'s options.
#[derive(Debug, clap::Args)]
pub struct HeatmapArgs {
    /// The seeds' experiment: 'I do not want to go to the office' and 'I do want to go to the
    /// office', seeded embeddings and projections, side by side
    #[arg(long, conflicts_with_all = ["q", "k", "labels", "key_labels"])]
    demo: bool,
    /// Queries (.npy)
    #[arg(long, value_name = "Q.npy", required_unless_present = "demo")]
    q: Option<String>,
    /// Keys (.npy)
    #[arg(long, value_name = "K.npy", required_unless_present = "demo")]
    k: Option<String>,
    /// Query labels: a text file of whitespace-separated tokens (indices when their number
    /// does not match)
    #[arg(long, value_name = "TOKENS.txt")]
    labels: Option<String>,
    /// Key labels, as --labels [default: the query labels]
    #[arg(long, value_name = "TOKENS.txt")]
    key_labels: Option<String>,
    /// The causal rule
    #[arg(long, value_enum, default_value_t = CausalArg::None)]
    causal: CausalArg,
    /// The factor the scores are multiplied by [default: 1/sqrt(D)]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    scale: Option<f32>,
    /// The picture's title
    #[arg(long, value_name = "T")]
    title: Option<String>,
    /// Where to write the PNG
    #[arg(long, value_name = "FILE.png", default_value = "heatmap.png")]
    out: String,
}

/// A panel's data before it is borrowed for drawing: weights, query labels, key labels, title.
type PanelData = (ArrayD<f32>, Vec<String>, Vec<String>, String);

fn read_labels(path: Option<&str>) -> Result<Vec<String>, Failure> {
    match path {
        None => Ok(Vec::new()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Failure::input(format!("{p}: cannot read labels: {e}")))?;
            Ok(text.split_whitespace().map(str::to_string).collect())
        }
    }
}

fn read_f32(path: &str) -> Result<ArrayD<f32>, Failure> {
    match npy::read(path).map_err(Failure::from_error)? {
        NpyArray::F32(a) => Ok(a),
        NpyArray::Bool(_) => Err(Failure::input(format!(
            "{path}: expected float32, float64 or float16, got bool"
        ))),
    }
}

/// Weights of `q` against `k` on the GPU (unfused path, the one that returns them).
fn weights(
    ctx: &Context,
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
) -> Result<ArrayD<f32>, Failure> {
    // V does not affect the weights; one column of zeros with k's leading shape.
    let mut v_shape = k.shape().to_vec();
    if let Some(last) = v_shape.last_mut() {
        *last = 1;
    }
    let v = ArrayD::<f32>::zeros(IxDyn(&v_shape));
    let r = wgpu_attention::attention(ctx, q, k, &v, &opts.clone().with_weights())
        .map_err(Failure::from_error)?;
    r.weights.ok_or_else(|| Failure {
        code: 1,
        message: "no weights returned".into(),
    })
}

pub fn run(args: HeatmapArgs) -> Result<(), Failure> {
    let out = args.out;
    super::check_output_path("out", &out)?;
    let causal = Causal::from(args.causal);
    let scale = args.scale;
    let opts = AttentionOptions {
        causal,
        scale,
        ..Default::default()
    };
    let ctx = Context::new().map_err(Failure::from_error)?;

    let (title, panels_data): (String, Vec<PanelData>) = if args.demo {
        let mut data = Vec::new();
        for (i, words) in SENTENCES.iter().enumerate() {
            let (tokens, q, k, _) = sentence(words, 42);
            let w = weights(&ctx, &q, &k, &opts)?;
            if let Some(third) = tokens.get(2) {
                println!(
                    "\"{words}\": weight of \"I\" on \"{third}\" = {:.4}",
                    w[[0, 2]]
                );
            }
            data.push((
                w,
                tokens.clone(),
                tokens,
                format!("sentence {}: \"{words}\"", i + 1),
            ));
        }
        let t = args
            .title
            .as_deref()
            .unwrap_or("Attention weights: one word changed (seeded d_model 4 embeddings)");
        (t.to_string(), data)
    } else {
        // clap requires both without --demo.
        let (Some(qp), Some(kp)) = (&args.q, &args.k) else {
            return Err(Failure::usage(
                "heatmap",
                "--q and --k are required without --demo",
            ));
        };
        let q = read_f32(qp)?;
        let k = read_f32(kp)?;
        let ql = read_labels(args.labels.as_deref())?;
        let (kl, key_option) = match args.key_labels.as_deref() {
            Some(p) => (read_labels(Some(p))?, "--key-labels"),
            None => (ql.clone(), "--labels"),
        };
        let w = weights(&ctx, &q, &k, &opts)?;
        // Panels: one per (batch, head) for rank 3 and 4 inputs.
        let (lq, lk) = (w.shape()[w.ndim() - 2], w.shape()[w.ndim() - 1]);
        // Labels that do not match are drawn as indices (as --help says); said here too, so
        // that a file of the wrong tokens is not taken for the right one unremarked.
        for (option, given, n, what) in [
            ("--labels", &ql, lq, "query rows"),
            (key_option, &kl, lk, "keys"),
        ] {
            if !given.is_empty() && given.len() != n {
                eprintln!(
                    "wgpu-attention: note: {option} has {} tokens for {n} {what}: the {what} \
                     are numbered instead",
                    given.len()
                );
            }
        }
        let heads = w.len() / (lq * lk).max(1);
        let flat = w
            .into_shape_with_order(IxDyn(&[heads, lq, lk]))
            .map_err(|e| Failure::input(e.to_string()))?;
        let data = flat
            .axis_iter(Axis(0))
            .enumerate()
            .map(|(h, m)| {
                (
                    m.to_owned().into_dyn(),
                    ql.clone(),
                    kl.clone(),
                    format!("head {h}"),
                )
            })
            .collect();
        (
            args.title
                .unwrap_or_else(|| "Attention weights".to_string()),
            data,
        )
    };
    let mut views = Vec::new();
    for (w, ql, kl, t) in &panels_data {
        let m = w
            .view()
            .into_dimensionality::<Ix2>()
            .map_err(|e| Failure::input(e.to_string()))?;
        views.push(Panel {
            weights: m,
            query_labels: ql.clone(),
            key_labels: kl.clone(),
            title: t.clone(),
        });
    }
    let subtitle = format!("{title}  [{}]", ctx.adapter_name());
    let canvas = render_panels(&subtitle, &views).map_err(Failure::from_error)?;
    canvas.save_png(&out).map_err(Failure::from_error)?;
    println!("heatmap written to {out}");
    Ok(())
}
