//! The step's linear solve by stage, at 16×16 and 61×61 (a cloth hanging
//! from two corners, stretched by its swing): membrane assembly, the
//! bending product (assembled stencil and matrix-free), the multigrid's
//! set-up and one application, one matrix–vector product (scatter, and the
//! desktop's gather with the bending in the same pass) and the whole
//! preconditioned CG solve.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use weft_core::math::{Mat3, Vec3};
use weft_core::physics::gather::{self, Gather};
use weft_core::physics::multigrid::{Layout, Multigrid};
use weft_core::physics::solver::{Stop, System};
use weft_core::physics::stencil::{Bending, BendingStencil, Scratch, PER_NODE};
use weft_core::physics::{assemble, step};
use weft_core::prelude::*;
use weft_host::sim::storage::{VecMeshStorage, VecStateStorage};

fn bench(c: &mut Criterion) {
    for n in [16usize, 61] {
        let grid = Grid::vertical(n, n, 1.0, 1.0, 0.0);
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let top = grid.ny - 1;
        let pins = [grid.node(0, top), grid.node(n - 1, top)].map(|i| Pin::fixed(i as u16, mesh.rest()[i]));
        let scene = Scene { pins: &pins, ..Scene::default() };
        let model = Model::new(mesh, Material::COTTON, scene, StepParams::default()).unwrap();
        let mut ss = VecStateStorage::new(&model, 0);
        let mut state = State::new(&model, ss.storage()).unwrap();
        for _ in 0..20 {
            step(&model, &mut state).unwrap();
        }
        let x = state.positions().to_vec();
        let nodes = x.len();
        let mut pool = vec![0.0; PER_NODE * nodes + Layout::of(mesh.counts().grid).floats()];
        let (sp, mp) = pool.split_at_mut(PER_NODE * nodes);
        let stencil = BendingStencil::new(&mesh, model.material.plate(), sp).unwrap();
        let bend = Bending::Stencil(&stencil);
        let (mut f, mut diag, mut off) =
            (vec![Vec3::ZERO; nodes], vec![Mat3::ZERO; nodes], vec![Mat3::ZERO; mesh.edges().len()]);
        let id = |s: &str| BenchmarkId::new(s, format!("{n}x{n}"));
        let mut g = c.benchmark_group("solve");
        g.bench_function(id("membrane assembly"), |b| {
            b.iter(|| {
                assemble(
                    &model,
                    Bending::MatrixFree(Material::COTTON.plate(), Scratch::NONE),
                    &x,
                    &mut f,
                    &mut diag,
                    &mut off,
                )
            })
        });
        let mut out = vec![Vec3::ZERO; nodes];
        g.bench_function(id("bending product, stencil"), |b| b.iter(|| stencil.apply(1.0, black_box(&x), &mut out)));
        g.bench_function(id("bending product, matrix-free"), |b| {
            b.iter(|| {
                Bending::MatrixFree(model.material.plate(), Scratch::NONE).apply(&mesh, 1.0, black_box(&x), &mut out)
            })
        });
        assemble(&model, bend, &x, &mut f, &mut diag, &mut off);
        let c2 = 1.0 / 3600.0;
        let mut precond: Vec<Mat3> =
            diag.iter().enumerate().map(|(i, d)| *d * c2 + Mat3::scale(model.mass(i))).collect();
        bend.add_diagonal(&mesh, c2, &mut precond);
        precond.iter_mut().for_each(|p| *p = p.inverse().unwrap());
        let (flags, normal) = (vec![0u8; nodes], vec![Vec3::ZERO; nodes]);
        let system = System {
            mesh: &mesh,
            diag: &diag,
            off: &off,
            bending: bend,
            density: model.material.density,
            m_scale: 1.0,
            c: c2,
            precond: &precond,
            flags: &flags,
            normal: &normal,
            gather: None,
        };
        let mut mg = Multigrid::new(&mesh, &stencil, mp).unwrap();
        g.bench_function(id("matrix-vector product"), |b| b.iter(|| system.apply(black_box(&x), &mut out)));
        let mut gpool = vec![0.0; gather::floats(mesh.counts().grid)];
        let mut table = Gather::new(&mesh, &mut gpool, Some(&stencil)).unwrap();
        table.build(&mesh, &diag, &off);
        let gathered = System { gather: Some(&table), ..system };
        g.bench_function(id("matrix-vector product, gather"), |b| b.iter(|| gathered.apply(black_box(&x), &mut out)));
        g.bench_function(id("multigrid set-up"), |b| b.iter(|| system.prepare(&mut mg)));
        system.prepare(&mut mg);
        let rhs: Vec<Vec3> =
            (0..nodes).map(|i| (Vec3::new(0.0, -9.81 * model.mass(i), 0.0) + f[i]) * (1.0 / 60.0)).collect();
        let mut t = vec![Vec3::ZERO; nodes];
        g.bench_function(id("multigrid application"), |b| {
            b.iter(|| system.preconditioned(&mut mg, black_box(&rhs), &mut out, &mut t))
        });
        let (mut dv, mut r, mut p, mut q) =
            (vec![Vec3::ZERO; nodes], rhs.clone(), vec![Vec3::ZERO; nodes], vec![Vec3::ZERO; nodes]);
        g.bench_function(id("whole solve (tolerance 1e-5)"), |b| {
            b.iter(|| {
                dv.fill(Vec3::ZERO);
                r.copy_from_slice(&rhs);
                let stop = Stop { max_iterations: 500, tolerance: 1e-5, reference: 0.0 };
                black_box(system.pcg(&mut dv, &mut r, [&mut p, &mut q, &mut t], &mut mg, stop))
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
