//! A BERT encoder — the architecture of all-MiniLM-L6-v2 — reduced to what sentence
//! embeddings need: the configuration, the weights read from a safetensors file, and the
//! forward pass of one tokenised text, mean-pooled and L2-normalised.
//!
//! One text at a time, so there is no padding and no attention mask; a batch is spread
//! over threads by the caller. The products run in [`kernel`](crate::kernel).

use crate::kernel::{self, Activation, Linear};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

/// The fields of a Hugging Face `config.json` the forward pass depends on.
#[derive(Debug, Deserialize)]
struct Config {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_act")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

#[derive(Debug)]
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

#[derive(Debug)]
struct Layer {
    /// Query, key and value in one product (their weights stacked).
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// A loaded BERT encoder.
#[derive(Debug)]
pub(crate) struct Bert {
    hidden: usize,
    heads: usize,
    vocab: usize,
    max_positions: usize,
    eps: f32,
    activation: Activation,
    /// The vocabulary's embeddings in half precision, like the layers' weights: the
    /// largest tensor (30,522 × 384), of which a text reads a few rows.
    words: Vec<u16>,
    positions: Vec<f32>,
    /// Token type 0's embedding: sentence embeddings have one segment.
    segment: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl Bert {
    /// Reads a model from the bytes of its `config.json` and `model.safetensors`. The error
    /// says which of the two is wrong and why.
    pub(crate) fn load(config: &[u8], weights: &[u8]) -> Result<Bert, LoadError> {
        let c: Config =
            serde_json::from_slice(config).map_err(|e| LoadError::Config(e.to_string()))?;
        let activation = match c.hidden_act.as_str() {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(LoadError::Config(format!(
                    "unsupported hidden_act {other:?}"
                )));
            }
        };
        if let Some(p) = c
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return Err(LoadError::Config(format!(
                "unsupported position_embedding_type {p:?}"
            )));
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(LoadError::Config(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                c.hidden_size, c.num_attention_heads
            )));
        }
        if c.type_vocab_size == 0 {
            return Err(LoadError::Config("type_vocab_size is 0".into()));
        }

        let st =
            SafeTensors::deserialize(weights).map_err(|e| LoadError::Weights(e.to_string()))?;
        let t = Tensors::new(st)?;
        let h = c.hidden_size;
        let i = c.intermediate_size;
        let norm = |name: &str| -> Result<Norm, LoadError> {
            Ok(Norm {
                gamma: t.either(&format!("{name}.weight"), &format!("{name}.gamma"), &[h])?,
                beta: t.either(&format!("{name}.bias"), &format!("{name}.beta"), &[h])?,
            })
        };
        let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, LoadError> {
            let w = t.get(&format!("{name}.weight"), &[outputs, inputs])?;
            let b = t.get(&format!("{name}.bias"), &[outputs])?;
            Linear::new(&w, b, inputs).map_err(|e| LoadError::Weights(format!("{name}: {e}")))
        };

        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for l in 0..c.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let mut w = Vec::with_capacity(3 * h * h);
            let mut b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                w.extend(t.get(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                b.extend(t.get(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Linear::new(&w, b, h)
                    .map_err(|e| LoadError::Weights(format!("{p}.attention.self: {e}")))?,
                attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense"), h, i)?,
                down: linear(&format!("{p}.output.dense"), i, h)?,
                output_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        let types = t.get(
            "embeddings.token_type_embeddings.weight",
            &[c.type_vocab_size, h],
        )?;
        Ok(Bert {
            hidden: h,
            heads: c.num_attention_heads,
            vocab: c.vocab_size,
            max_positions: c.max_position_embeddings,
            eps: c.layer_norm_eps as f32,
            activation,
            words: to_half(t.get("embeddings.word_embeddings.weight", &[c.vocab_size, h])?)?,
            positions: t.get(
                "embeddings.position_embeddings.weight",
                &[c.max_position_embeddings, h],
            )?,
            segment: types[..h].to_vec(),
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// Length of the embeddings.
    pub(crate) fn dim(&self) -> usize {
        self.hidden
    }

    /// The longest input the position embeddings cover.
    pub(crate) fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The unit-length mean of the last layer's token states for one tokenised text.
    pub(crate) fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        let h = self.hidden;
        let n = ids.len();
        if n == 0 {
            return Err("no tokens to embed".into());
        }
        if n > self.max_positions {
            return Err(format!(
                "{n} tokens, more than the model's {}",
                self.max_positions
            ));
        }
        let mut x = vec![0.0f32; n * h];
        for (pos, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(h)).enumerate() {
            let id = id as usize;
            if id >= self.vocab {
                return Err(format!(
                    "token id {id} outside the vocabulary of {}",
                    self.vocab
                ));
            }
            let word = &self.words[id * h..][..h];
            let position = &self.positions[pos * h..][..h];
            for (k, v) in row.iter_mut().enumerate() {
                *v = half::f16::from_bits(word[k]).to_f32() + position[k] + self.segment[k];
            }
        }
        let norm = &self.embedding_norm;
        kernel::layer_norm(&mut x, &norm.gamma, &norm.beta, self.eps);

        let mut scratch = Scratch::new(n, h, self.layers.first().map_or(0, |l| l.up.outputs()));
        for layer in &self.layers {
            self.layer(layer, &mut x, &mut scratch);
        }

        let mut mean = vec![0.0f32; h];
        for row in x.chunks_exact(h) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        let length = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        // Dividing by the token count first would not change the direction.
        Ok(mean.into_iter().map(|v| v / length).collect())
    }

    fn layer(&self, layer: &Layer, x: &mut [f32], s: &mut Scratch) {
        let h = self.hidden;
        let n = x.len() / h;
        let head = h / self.heads;
        let scale = 1.0 / (head as f32).sqrt();

        layer.qkv.forward(x, &mut s.qkv);
        s.context.fill(0.0);
        for hd in 0..self.heads {
            let q_at = |i: usize| &s.qkv[i * 3 * h + hd * head..][..head];
            let k_at = |j: usize| &s.qkv[j * 3 * h + h + hd * head..][..head];
            let v_at = |j: usize| &s.qkv[j * 3 * h + 2 * h + hd * head..][..head];
            for i in 0..n {
                let q = q_at(i);
                for (j, score) in s.scores.iter_mut().enumerate() {
                    *score = kernel::dot(q, k_at(j)) * scale;
                }
                kernel::softmax(&mut s.scores);
                let out = &mut s.context[i * h + hd * head..][..head];
                for (j, &p) in s.scores.iter().enumerate() {
                    for (o, v) in out.iter_mut().zip(v_at(j)) {
                        *o += p * v;
                    }
                }
            }
        }

        layer.attention_out.forward(&s.context, &mut s.hidden);
        add(&mut s.hidden, x);
        let norm = &layer.attention_norm;
        kernel::layer_norm(&mut s.hidden, &norm.gamma, &norm.beta, self.eps);
        x.copy_from_slice(&s.hidden);

        layer.up.forward(x, &mut s.intermediate);
        self.activation.apply(&mut s.intermediate);
        layer.down.forward(&s.intermediate, &mut s.hidden);
        add(&mut s.hidden, x);
        let norm = &layer.output_norm;
        kernel::layer_norm(&mut s.hidden, &norm.gamma, &norm.beta, self.eps);
        x.copy_from_slice(&s.hidden);
    }
}

/// `values` as IEEE half-precision bits; an error names a value that does not fit.
fn to_half(values: Vec<f32>) -> Result<Vec<u16>, LoadError> {
    values
        .into_iter()
        .map(|v| {
            let h = half::f16::from_f32(v);
            if h.is_finite() {
                Ok(h.to_bits())
            } else {
                Err(LoadError::Weights(format!(
                    "embedding value {v} does not fit half precision"
                )))
            }
        })
        .collect()
}

fn add(to: &mut [f32], from: &[f32]) {
    for (t, f) in to.iter_mut().zip(from) {
        *t += f;
    }
}

/// Buffers one forward pass reuses across layers.
struct Scratch {
    qkv: Vec<f32>,
    scores: Vec<f32>,
    context: Vec<f32>,
    hidden: Vec<f32>,
    intermediate: Vec<f32>,
}

impl Scratch {
    fn new(n: usize, h: usize, intermediate: usize) -> Scratch {
        Scratch {
            qkv: vec![0.0; n * 3 * h],
            scores: vec![0.0; n],
            context: vec![0.0; n * h],
            hidden: vec![0.0; n * h],
            intermediate: vec![0.0; n * intermediate],
        }
    }
}

/// Which file of a model is wrong.
#[derive(Debug)]
pub(crate) enum LoadError {
    Config(String),
    Weights(String),
}

/// Tensors by name, with or without the `bert.` prefix some exports carry, converted to f32.
struct Tensors<'a> {
    st: SafeTensors<'a>,
    prefix: &'static str,
}

impl<'a> Tensors<'a> {
    fn new(st: SafeTensors<'a>) -> Result<Tensors<'a>, LoadError> {
        let probe = "embeddings.word_embeddings.weight";
        let prefix = ["", "bert."]
            .into_iter()
            .find(|p| st.tensor(&format!("{p}{probe}")).is_ok())
            .ok_or_else(|| LoadError::Weights(format!("no tensor {probe}: not a BERT model")))?;
        Ok(Tensors { st, prefix })
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .st
            .tensor(&full)
            .map_err(|_| LoadError::Weights(format!("no tensor {full}")))?;
        if t.shape() != shape {
            return Err(LoadError::Weights(format!(
                "tensor {full} has shape {:?}, expected {shape:?}",
                t.shape()
            )));
        }
        let data = t.data();
        let values = match t.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(LoadError::Weights(format!(
                    "tensor {full} is {other:?}; f32, f16 and bf16 are supported"
                )));
            }
        };
        Ok(values)
    }

    /// The tensor under `name`, or under the older `alternative` (LayerNorm's gamma/beta).
    fn either(
        &self,
        name: &str,
        alternative: &str,
        shape: &[usize],
    ) -> Result<Vec<f32>, LoadError> {
        self.get(name, shape)
            .or_else(|e| match self.get(alternative, shape) {
                Ok(v) => Ok(v),
                Err(_) => Err(e),
            })
    }
}
