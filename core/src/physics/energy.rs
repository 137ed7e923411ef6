//! The cloth's elastic energy (membrane and bending) with a bound on its
//! rounding, which the step's energy check and audit measure, and the
//! step's memory of the last placement measured.

use crate::math::Vec3;
use crate::model::Model;
use crate::physics::bending;
use crate::physics::stencil::BendingStencil;

/// Elastic energy of a placement, and a bound on its `f32` rounding noise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elastic {
    pub membrane: f32,
    pub bending: f32,
    /// The stresses times the strain error of each element's deformation
    /// gradient (`ε Σ |x_k| |∇φ_k|`, the cancellation of node positions far
    /// from the origin), the bending moments times the same error of each
    /// hinge's measure.
    pub noise: f32,
}

impl Elastic {
    pub fn total(&self) -> f32 {
        self.membrane + self.bending
    }
}

/// Membrane and bending energy of positions `x`, with its rounding bound;
/// `cache` is scratch for the bending's hinges
/// ([`bending::energy_and_noise_cached`]; the solver's idle blocks during a
/// step), or empty.
pub fn elastic(model: &Model, x: &[Vec3], cache: &mut [[f32; 4]]) -> Elastic {
    elastic_with(model, x, None, cache)
}

/// [`elastic`] with the bending energy from the grid's assembled
/// `stencil` when given ([`BendingStencil::energy_and_noise`]: the same
/// quadratic form as the hinges', a fraction of the work), else from the
/// hinges with `cache` as scratch.
pub fn elastic_with(model: &Model, x: &[Vec3], stencil: Option<&BendingStencil>, cache: &mut [[f32; 4]]) -> Elastic {
    let mem = model.material.membrane();
    let mut el = Elastic { membrane: 0.0, bending: 0.0, noise: 0.0 };
    for t in model.mesh.triangles() {
        let xs = t.nodes.map(|i| x[i as usize]);
        let (energy, stress) = mem.energy_and_stress(t, xs, model.mesh.membrane_rest(t));
        el.membrane += energy;
        let df: f32 =
            xs.iter().zip(&t.grad).map(|(xk, g)| xk.norm_l1() * (libm::fabsf(g[0]) + libm::fabsf(g[1]))).sum();
        el.noise += stress * df;
    }
    let (bending, noise) = match stencil {
        Some(s) => s.energy_and_noise(x),
        None => bending::energy_and_noise_cached(&model.mesh, model.material.plate(), x, cache),
    };
    el.bending = bending;
    el.noise += noise;
    el.noise *= f32::EPSILON;
    el
}

/// The elastic energy a step measured last and the positions it measured
/// it at. A step measures the same placement more than once: the audit's
/// start and the energy check's start when no constraint moves a node, the
/// check's last trial and the audit's end when no contact, friction or
/// strain limit changes the candidate. A placement equal to the last bit
/// for bit has its energy to the last bit, so it is not measured again.
/// Forgotten at every step's start (the model may have changed between
/// steps).
pub(crate) struct ElasticMemo<'a> {
    x: &'a mut [Vec3],
    el: Option<Elastic>,
}

impl<'a> ElasticMemo<'a> {
    pub(crate) fn new(x: &'a mut [Vec3]) -> ElasticMemo<'a> {
        ElasticMemo { x, el: None }
    }

    pub(crate) fn forget(&mut self) {
        self.el = None;
    }

    /// [`elastic`] of `x`, from memory if it measured `x` last.
    pub(crate) fn elastic(
        &mut self,
        model: &Model,
        x: &[Vec3],
        stencil: Option<&BendingStencil>,
        cache: &mut [[f32; 4]],
    ) -> Elastic {
        match self.el {
            Some(el) if same_bits(self.x, x) => el,
            _ => {
                let el = elastic_with(model, x, stencil, cache);
                let stored = self.x.len() == x.len();
                if stored {
                    self.x.copy_from_slice(x);
                }
                self.el = stored.then_some(el);
                el
            }
        }
    }
}

/// Whether two placements are equal bit for bit.
fn same_bits(a: &[Vec3], b: &[Vec3]) -> bool {
    bytemuck::cast_slice::<Vec3, u32>(a) == bytemuck::cast_slice::<Vec3, u32>(b)
}

/// Energy split by source (J).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Energy {
    pub kinetic: f32,
    pub membrane: f32,
    pub bending: f32,
    /// Gravitational potential `−Σ m g·x`.
    pub gravity: f32,
}

impl Energy {
    pub fn total(&self) -> f32 {
        self.kinetic + self.membrane + self.bending + self.gravity
    }
}

/// Energy of positions `x` and velocities `v`.
pub fn energy(model: &Model, x: &[Vec3], v: &[Vec3]) -> Energy {
    energy_with(model, x, v, |x| elastic(model, x, &mut [])).0
}

/// [`energy`] with the elastic part from `elastic`, and the elastic
/// energy's rounding bound ([`Elastic::noise`]).
pub(crate) fn energy_with(
    model: &Model,
    x: &[Vec3],
    v: &[Vec3],
    elastic: impl FnOnce(&[Vec3]) -> Elastic,
) -> (Energy, f32) {
    let mut e = Energy::default();
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        let m = model.mass(i);
        e.kinetic += 0.5 * m * vi.norm2();
        e.gravity -= m * model.scene.gravity.dot(*xi);
    }
    let el = elastic(x);
    (e.membrane, e.bending) = (el.membrane, el.bending);
    (e, el.noise)
}

/// The strain `l/l₀ − 1` of every static edge (positive: stretched).
pub fn edge_strains<'s>(model: &'s Model, x: &'s [Vec3]) -> impl Iterator<Item = f32> + 's {
    model.mesh.edges().iter().map(move |e| {
        let (a, b) = (e.a as usize, e.b as usize);
        (x[b] - x[a]).norm() / e.rest - 1.0
    })
}

/// Largest relative change of a static edge's length, `max |l/l₀ − 1|`.
pub fn max_strain(model: &Model, x: &[Vec3]) -> f32 {
    edge_strains(model, x).map(f32::abs).fold(0.0, f32::max)
}

#[cfg(test)]
mod tests {
    use super::{elastic, ElasticMemo};
    use crate::math::Vec3;
    use crate::mesh::{BendTriangle, Edge, Grid, Hinge, Mesh, MeshCounts, MeshError, MeshStorage, Triangle};
    use crate::model::{Material, Model, ParamError, Scene, StepParams};

    const C: MeshCounts = MeshCounts::grid(4, 4);

    /// A mesh or model the test could not build.
    #[derive(Debug)]
    #[allow(dead_code)]
    enum Setup {
        Mesh(MeshError),
        Model(ParamError),
    }

    #[test]
    fn memo_answers_only_for_the_same_placement() -> Result<(), Setup> {
        let (mut rest, mut node_area) = ([Vec3::ZERO; C.nodes], [0.0; C.nodes]);
        let (mut triangles, mut bending) = ([Triangle::default(); C.triangles], [BendTriangle::default(); C.triangles]);
        let (mut edges, mut edge_start) = ([Edge::default(); C.edges], [0u16; C.nodes]);
        let mut hinges = [Hinge::default(); C.hinges];
        let storage = MeshStorage {
            rest: &mut rest,
            node_area: &mut node_area,
            triangles: &mut triangles,
            edges: &mut edges,
            edge_start: &mut edge_start,
            hinges: &mut hinges,
            bending: &mut bending,
        };
        let mesh = Mesh::grid(&Grid::horizontal(4, 4, 0.3, 0.3, 0.0), storage).map_err(Setup::Mesh)?;
        let model =
            Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).map_err(Setup::Model)?;
        let mut x: [Vec3; C.nodes] = core::array::from_fn(|i| model.mesh.rest()[i] * 1.05);
        let mut copy = [Vec3::ZERO; C.nodes];
        let mut memo = ElasticMemo::new(&mut copy);
        let first = memo.elastic(&model, &x, None, &mut []);
        assert_eq!(first, elastic(&model, &x, &mut []));
        assert!(first.membrane > 0.0);
        assert_eq!(memo.elastic(&model, &x, None, &mut []), first);
        // One node moved: measured again, not remembered.
        x[5].z += 0.01;
        let moved = memo.elastic(&model, &x, None, &mut []);
        assert_eq!(moved, elastic(&model, &x, &mut []));
        assert_ne!(moved, first);
        memo.forget();
        assert_eq!(memo.elastic(&model, &x, None, &mut []), moved);
        Ok(())
    }
}
