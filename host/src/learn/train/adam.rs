//! Adam (Kingma and Ba 2015, no weight decay) whose whole state — the
//! first and second moments of every weight and the step count — can be
//! read out and put back, so that a checkpoint resumes training exactly
//! ([`crate::learn::train::checkpoint`]). The update runs on plain `f32`
//! slices, the same arithmetic for every weight in a fixed order (the
//! weights sorted by name), so that the same gradients give the same bits.

use anyhow::{bail, Context, Result};
use candle_core::{Tensor, Var};
use candle_nn::VarMap;

/// Adam's state beside the weights it moves.
pub struct Adam {
    /// The weights, sorted by name.
    vars: Vec<(String, Var)>,
    /// First moments, one vector per weight tensor, as `vars`.
    pub m: Vec<Vec<f32>>,
    /// Second moments, as `m`.
    pub v: Vec<Vec<f32>>,
    /// Updates taken.
    pub t: u64,
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

impl Adam {
    /// A fresh optimizer over every weight of `varmap` at learning rate `lr`
    /// (β₁ 0.9, β₂ 0.999, ε 1e-8).
    pub fn new(varmap: &VarMap, lr: f64) -> Result<Adam> {
        let data = varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
        let mut vars: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros: Vec<Vec<f32>> = vars.iter().map(|(_, v)| vec![0.0; v.elem_count()]).collect();
        Ok(Adam { vars, m: zeros.clone(), v: zeros, t: 0, lr, beta1: 0.9, beta2: 0.999, eps: 1e-8 })
    }

    /// The weights' names, in the order of [`Adam::m`] and [`Adam::v`].
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.iter().map(|(n, _)| n.as_str())
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Puts back moments read from a checkpoint; refuses sizes that are not
    /// the weights'.
    pub fn restore(&mut self, m: Vec<Vec<f32>>, v: Vec<Vec<f32>>, t: u64) -> Result<()> {
        let sizes: Vec<usize> = self.vars.iter().map(|(_, v)| v.elem_count()).collect();
        let fits = |x: &[Vec<f32>]| x.len() == sizes.len() && x.iter().zip(&sizes).all(|(a, &n)| a.len() == n);
        if !fits(&m) || !fits(&v) {
            bail!("the optimizer's moments do not fit the network's {} weight tensors", sizes.len());
        }
        (self.m, self.v, self.t) = (m, v, t);
        Ok(())
    }

    /// Back-propagates `loss` and takes one update.
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        self.step(&loss.backward()?)
    }

    /// One update from the gradients `grads`.
    pub fn step(&mut self, grads: &candle_core::backprop::GradStore) -> Result<()> {
        self.t += 1;
        let scale_m = (1.0 / (1.0 - self.beta1.powi(self.t as i32))) as f32;
        let scale_v = (1.0 / (1.0 - self.beta2.powi(self.t as i32))) as f32;
        let (b1, b2, lr, eps) = (self.beta1 as f32, self.beta2 as f32, self.lr as f32, self.eps as f32);
        for (k, (name, var)) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var) else { continue };
            let g = g.flatten_all()?.to_vec1::<f32>().with_context(|| format!("the gradient of {name}"))?;
            let mut w = var.as_tensor().flatten_all()?.to_vec1::<f32>()?;
            let (m, v) = (&mut self.m[k], &mut self.v[k]);
            for i in 0..w.len() {
                m[i] = b1 * m[i] + (1.0 - b1) * g[i];
                v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
                w[i] -= lr * (m[i] * scale_m) / ((v[i] * scale_v).sqrt() + eps);
            }
            var.set(&Tensor::from_vec(w, var.shape(), var.device())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    /// On `f(w) = Σ (w − c)²` Adam's first step moves every weight by the
    /// learning rate towards `c` (the bias-corrected ratio m̂/√v̂ is the
    /// gradient's sign), and it converges.
    #[test]
    fn adam_steps_by_the_learning_rate_and_converges() {
        let dev = Device::Cpu;
        let varmap = VarMap::new();
        let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &dev);
        let w = vb.get_with_hints(3, "w", candle_nn::Init::Const(0.0)).unwrap();
        let c = Tensor::new(&[1.0f32, -2.0, 0.5], &dev).unwrap();
        let mut opt = Adam::new(&varmap, 0.1).unwrap();
        let loss = |w: &Tensor| (w - &c).unwrap().sqr().unwrap().sum_all().unwrap();
        opt.backward_step(&loss(&w)).unwrap();
        let w1 = varmap.data().lock().unwrap()["w"].as_tensor().to_vec1::<f32>().unwrap();
        for (a, e) in w1.iter().zip([0.1f32, -0.1, 0.1]) {
            assert!((a - e).abs() < 1e-6, "{w1:?}");
        }
        for _ in 0..500 {
            let w = varmap.data().lock().unwrap()["w"].as_tensor().clone();
            opt.backward_step(&loss(&w)).unwrap();
        }
        let w = varmap.data().lock().unwrap()["w"].as_tensor().to_vec1::<f32>().unwrap();
        for (a, e) in w.iter().zip([1.0f32, -2.0, 0.5]) {
            assert!((a - e).abs() < 1e-2, "{w:?}");
        }
    }
}
