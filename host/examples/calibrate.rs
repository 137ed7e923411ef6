//! Plain's errors at horizons on a split with the coarse material scaled.
use rayon::prelude::*;
use weft_host::learn::columns::Column;
use weft_host::learn::dataset::load_split;
use weft_host::learn::horizons::horizon_errors;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[1]);
    let split = args[2].clone();
    let trajs = load_split(&dir, Some(&split))?;
    for cfg in args[3..].iter() {
        // bending×,stretch×,damping_mass=,damping_stiffness=,col
        let f: Vec<&str> = cfg.split(',').collect();
        let (b, s): (f32, f32) = (f[0].parse()?, f[1].parse()?);
        let col = match f.get(4).copied() {
            Some("bdf2") => Column::Bdf2,
            _ => Column::Plain,
        };
        let res: Vec<(String, [f32; 3])> = trajs
            .par_iter()
            .map(|t| {
                let mut t = t.clone();
                let m = &mut t.scenario.material;
                m.bending *= b;
                m.stretch *= s;
                if let Some(d) = f.get(2).and_then(|x| x.parse().ok()) {
                    m.damping_mass = d;
                }
                if let Some(d) = f.get(3).and_then(|x| x.parse().ok()) {
                    m.damping_stiffness = d;
                }
                if let Some(d) = f.get(5).and_then(|x| x.parse().ok()) {
                    m.poisson = d;
                }
                if let Some(d) = f.get(6).and_then(|x| x.parse().ok()) {
                    m.compression = d;
                }
                let e = horizon_errors(&t, col, None, None).unwrap().unwrap();
                (format!("{:?}", t.family), e)
            })
            .collect();
        let mut fams: Vec<String> = res.iter().map(|r| r.0.clone()).collect();
        fams.sort();
        fams.dedup();
        let mut line = format!("{cfg:>28}");
        for fam in &fams {
            let v: Vec<&[f32; 3]> = res.iter().filter(|r| &r.0 == fam).map(|r| &r.1).collect();
            let m = [0, 1, 2].map(|k| v.iter().map(|e| e[k]).sum::<f32>() / v.len() as f32);
            line += &format!("  {fam} {:.2e}/{:.2e}/{:.2e}", m[0], m[1], m[2]);
        }
        let all = [0, 1, 2].map(|k| res.iter().map(|e| e.1[k]).sum::<f32>() / res.len() as f32);
        line += &format!("  ALL {:.2e}/{:.2e}/{:.2e}", all[0], all[1], all[2]);
        println!("{line}");
    }
    Ok(())
}
