use weft_host::dataset::read_trajectory;
use weft_host::families::Rng;
use weft_host::gnn::{sample, GnnConfig, Noise};
fn main() {
    for f in ["hang", "drape", "fold"] {
        let t = read_trajectory(std::path::Path::new(&format!("/tmp/d_small/{f}_0000.safetensors"))).unwrap();
        for frame in [1usize, 50, 150] {
            for noise in [Noise { position: 0.0, velocity: 0.0 }, Noise { position: 1e-3, velocity: 0.03 }] {
                let g = sample(&t, frame, &GnnConfig::default(), noise, &mut Rng::new(5)).unwrap();
                let n = g.targets.len() as f32;
                let rms = |k: usize| (g.targets.iter().map(|r| r[k] * r[k]).sum::<f32>() / n).sqrt();
                let vy: f32 = g.nodes.iter().map(|r| r[1]).sum::<f32>() / n;
                println!("{f} t={frame} noise={} rms dx {:.4} {:.4} {:.4} dv {:.3} {:.3} {:.3} mean vy after step {:.3}", noise.position, rms(0), rms(1), rms(2), rms(3), rms(4), rms(5), vy);
            }
        }
    }
}
