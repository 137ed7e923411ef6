//! The float network (candle): MLPs, encoders, processor, heads, its
//! forward pass and losses.
use crate::learn::network::config::GnnConfig;
use crate::learn::network::config::Normalizer;
use crate::learn::network::graph::Batch;
use crate::learn::network::graph::Graph;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{linear, Linear, Module, VarBuilder};
use weft_core::gnn::int8::{Part, Parts};
use weft_core::prelude::*;

/// `Linear → ReLU → Linear`.
pub struct Mlp {
    pub l1: Linear,
    pub l2: Linear,
}

impl Mlp {
    fn new(vb: VarBuilder, input: usize, hidden: usize, output: usize) -> Result<Mlp> {
        Ok(Mlp { l1: linear(input, hidden, vb.pp("l1"))?, l2: linear(hidden, output, vb.pp("l2"))? })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.l2.forward(&self.l1.forward(x)?.relu()?)?)
    }
}

/// Builds a network's MLPs part by part ([`Part::all`]).
pub fn build_parts<T>(rounds: usize, mut f: impl FnMut(Part) -> Result<T>) -> Result<Parts<T, Vec<T>>> {
    Ok(Parts {
        node_enc: f(Part::NodeEncoder)?,
        edge_enc: f(Part::EdgeEncoder)?,
        edge_mlp: (0..rounds).map(|r| f(Part::EdgeUpdate(r))).collect::<Result<_>>()?,
        node_mlp: (0..rounds).map(|r| f(Part::NodeUpdate(r))).collect::<Result<_>>()?,
        head_x: f(Part::PositionHead)?,
        head_v: f(Part::VelocityHead)?,
    })
}

/// `f` of every MLP of `parts`, in the same layout (an error for a layout
/// with fewer node updates than edge updates).
pub fn map_parts<T, R: AsRef<[T]>, U>(
    parts: &Parts<T, R>,
    mut f: impl FnMut(Part, &T) -> Result<U>,
) -> Result<Parts<U, Vec<U>>> {
    build_parts(parts.rounds(), |p| f(p, parts.get(p).with_context(|| format!("no {p} MLP"))?))
}

/// The network.
pub struct Gnn {
    pub cfg: GnnConfig,
    pub mlps: Parts<Mlp, Vec<Mlp>>,
    /// The field head ([`GnnConfig::field_head`]).
    pub field: Option<Mlp>,
}

/// Terms of the field head's quadratic in the node's (normalised)
/// position relative to the centroid: 1, x, y, z, x², y², z², xy, yz, zx.
pub const FIELD_TERMS: usize = 10;

/// The field head's terms at every node, `[nodes, FIELD_TERMS]`, from the
/// normalised node features (position in columns 3–5).
fn field_terms(nodes: &Tensor) -> Result<Tensor> {
    let p = nodes.narrow(1, 3, 3)?;
    let (x, y, z) = (p.narrow(1, 0, 1)?, p.narrow(1, 1, 1)?, p.narrow(1, 2, 1)?);
    let one = Tensor::ones_like(&x)?;
    let terms = [&one, &x, &y, &z, &(&x * &x)?, &(&y * &y)?, &(&z * &z)?, &(&x * &y)?, &(&y * &z)?, &(&z * &x)?];
    Ok(Tensor::cat(&terms, 1)?)
}

impl Gnn {
    pub fn new(vb: VarBuilder, cfg: GnnConfig) -> Result<Gnn> {
        let l = cfg.latent;
        // Names and widths from the network's one list of parts.
        let mlp = |p: Part| {
            let (i, o) = p.widths(l);
            Mlp::new(vb.pp(p.to_string()), i, l, o)
        };
        let field =
            if cfg.field_head { Some(Mlp::new(vb.pp("field"), l * FIELD_TERMS, l, 6 * FIELD_TERMS)?) } else { None };
        Ok(Gnn { cfg, mlps: build_parts(cfg.rounds, mlp)?, field })
    }

    /// Normalised `[Δx, Δv]`, shape `[nodes, 6]`.
    pub fn forward(&self, b: &Batch) -> Result<Tensor> {
        let m = &self.mlps;
        let mut h = m.node_enc.forward(&b.nodes)?;
        let mut e = m.edge_enc.forward(&b.edges)?;
        for (em, nm) in m.rounds_iter() {
            let hs = h.index_select(&b.senders, 0)?;
            let hr = h.index_select(&b.receivers, 0)?;
            e = (&e + em.forward(&Tensor::cat(&[&e, &hs, &hr], 1)?)?)?;
            let agg = Tensor::zeros((b.n_nodes, self.cfg.latent), DType::F32, h.device())?
                .index_add(&b.receivers, &e, 0)?
                .broadcast_mul(&b.inv_degree)?;
            h = (&h + nm.forward(&Tensor::cat(&[&h, &agg], 1)?)?)?;
        }
        let out = Tensor::cat(&[&m.head_x.forward(&h)?, &m.head_v.forward(&h)?], 1)?;
        match &self.field {
            Some(f) => Ok((out + self.field(f, b, &h)?)?),
            None => Ok(out),
        }
    }

    /// The field head's correction at every node, `[nodes, 6]`: the mean
    /// over each sample's free nodes of `h ⊗ φ` (`φ` the
    /// [`FIELD_TERMS`] terms), through `f`, gives each sample's
    /// coefficients `C` (6 × terms); a node's correction is `C φ`.
    fn field(&self, f: &Mlp, b: &Batch, h: &Tensor) -> Result<Tensor> {
        let (n, l) = (b.n_nodes, self.cfg.latent);
        let phi = field_terms(&b.nodes)?;
        let outer = h.unsqueeze(2)?.broadcast_mul(&phi.unsqueeze(1)?)?.reshape((n, l * FIELD_TERMS))?;
        let outer = outer.broadcast_mul(&b.free)?;
        let samples = b.inv_free.dims()[0];
        let pooled = Tensor::zeros((samples, l * FIELD_TERMS), DType::F32, h.device())?
            .index_add(&b.sample, &outer, 0)?
            .broadcast_mul(&b.inv_free)?;
        let coef = f.forward(&pooled)?.index_select(&b.sample, 0)?.reshape((n, 6, FIELD_TERMS))?;
        Ok(coef.broadcast_mul(&phi.unsqueeze(1)?)?.sum(2)?)
    }

    /// Mean squared error of the normalised targets, weighted by
    /// [`Batch::weight`] (free nodes only).
    pub fn loss(&self, b: &Batch) -> Result<Tensor> {
        let Some(t) = &b.targets else { bail!("batch has no targets") };
        let d = (self.forward(b)? - t)?.sqr()?.broadcast_mul(&b.weight)?;
        let count = b.weight.sum_all()?.to_scalar::<f32>()?.max(1e-12) * 6.0;
        Ok((d.sum_all()? / count as f64)?)
    }

    /// Corrections `(Δx, Δv)` in physical units (zero on pinned nodes).
    pub fn correct(&self, g: &Graph, norm: &Normalizer, dev: &Device) -> Result<(Vec<Vec3>, Vec<Vec3>)> {
        let b = Batch::new(std::slice::from_ref(g), norm, dev)?;
        let out = self.forward(&b)?.to_vec2::<f32>()?;
        let t = &norm.target;
        let un = |row: &[f32], k: usize| row[k] * t.std[k] + t.mean[k];
        let mut dx = Vec::with_capacity(out.len());
        let mut dv = Vec::with_capacity(out.len());
        // A velocity-only network's position output is not used, nor a
        // position-only one's velocity output.
        let (fx, fv) = self.cfg.heads();
        for (row, &f) in out.iter().zip(&g.free) {
            dx.push(Vec3::new(un(row, 0), un(row, 1), un(row, 2)) * (f * fx));
            dv.push(Vec3::new(un(row, 3), un(row, 4), un(row, 5)) * (f * fv));
        }
        Ok((dx, dv))
    }
}
