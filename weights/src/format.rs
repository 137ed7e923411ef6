//! The quantised model file (`weft-gnn.q8`): writing, reading with full
//! validation, and the Rust source the build script bakes from it.
//!
//! Layout, all little-endian:
//!
//! | field | type |
//! |---|---|
//! | magic | `b"WEFTGNN8"` |
//! | format version | u32 ([`weft_core::gnn::int8::FORMAT_VERSION`]) |
//! | node features, edge features, latent, rounds | 4 × u32 |
//! | radius | f32 |
//! | coarse grain: stretch, compression factors | 2 × f32 (version 4; version 3 files read as 1, 1) |
//! | node inputs, edge inputs | (offset f32, gain f32) per feature |
//! | outputs | 6 × (scale f32, offset f32) |
//! | MLPs | node_enc, edge_enc, edge_mlp × rounds, node_mlp × rounds, head_x, head_v |
//! | checksum | CRC-32 (IEEE) of everything before, u32 |
//!
//! An MLP is two linear layers and a residual flag (u8). A linear layer is
//! inputs u32, outputs u32, a requantisation flag u8, weights i8 ×
//! inputs·outputs (row-major by output), biases i32 × outputs, then (flag
//! 1) a right shift u8 per output.
//!
//! Files of the earlier versions (1 and 2: Q31 multipliers and shifts, and
//! a residual's own requantisation) are refused with
//! [`FormatError::Version`]: quantise the float model again. A file of
//! fewer node features than [`NODE_FEATURES`] (the first
//! [`MATERIAL_NODE_FEATURES`], [`STEP_NODE_FEATURES`] or
//! [`WINDLESS_NODE_FEATURES`]) is read with zero weights on the features it
//! lacks, which computes what it computed; so is a file of version 5 and
//! before, whose node features had no history (its columns are placed by
//! [`historyless_column`]).

use std::fmt::{self, Write as _};

use weft_core::gnn::features::{
    historyless_column, EDGE_FEATURES, HISTORYLESS_NODE_FEATURES, MATERIAL_NODE_FEATURES, NODE_FEATURES,
    STEP_NODE_FEATURES, WINDLESS_NODE_FEATURES,
};
use weft_core::gnn::int8::{wide_len, widen, Input, Linear, Mlp, Network, Output, Part, Parts, FORMAT_VERSION};
use weft_core::model::CoarseGrain;

pub const MAGIC: &[u8; 8] = b"WEFTGNN8";
/// The format before the coarse grain: read with [`CoarseGrain::NONE`].
pub const GRAINLESS_VERSION: u32 = 3;
/// The format before the coarse grain's taut strain: read with none.
pub const TAUTLESS_VERSION: u32 = 4;
/// The format before the history among the node features
/// ([`weft_core::gnn::features::HISTORY`]): read with zero weights on it.
pub const HISTORYLESS_VERSION: u32 = 5;

/// What is wrong with a model file.
#[derive(Clone, Debug, PartialEq)]
pub enum FormatError {
    BadMagic,
    Version {
        found: u32,
        expected: u32,
    },
    Truncated {
        at: usize,
    },
    Checksum {
        stored: u32,
        computed: u32,
    },
    Features {
        what: &'static str,
        found: u32,
        expected: u32,
    },
    /// Layer shapes the core's network cannot run.
    Shape(String),
    /// A network the core's check refuses (a radius, scale or width out
    /// of bounds, or layers that do not fit together).
    Network(weft_core::gnn::int8::GnnError),
    TrailingBytes(usize),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::BadMagic => write!(f, "not a weft int8 model (magic is not WEFTGNN8)"),
            FormatError::Version { found, expected } => {
                write!(f, "format version {found}, this weft-core reads version {expected}")
            }
            FormatError::Truncated { at } => write!(f, "file ends early (at byte {at})"),
            FormatError::Checksum { stored, computed } => {
                write!(f, "checksum mismatch: stored {stored:08x}, contents give {computed:08x} (corrupt file)")
            }
            FormatError::Features { what, found, expected } => {
                write!(f, "{found} {what} features, weft-core computes {expected}")
            }
            FormatError::Shape(s) => write!(f, "layer shapes do not fit weft-core's network: {s}"),
            FormatError::Network(e) => write!(f, "{e}"),
            FormatError::TrailingBytes(n) => write!(f, "{n} unexpected bytes after the checksum"),
        }
    }
}

impl std::error::Error for FormatError {}

/// A dense layer owning its data.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearData {
    pub inputs: usize,
    pub outputs: usize,
    pub weights: Vec<i8>,
    pub bias: Vec<i32>,
    /// Right shift per output ([`Linear::shift`]); empty for a head's
    /// output layer.
    pub shift: Vec<u8>,
    /// The weights widened to 16-bit pairs ([`weft_core::gnn::int8::widen`]),
    /// which the sixteen-output kernels read; made by [`LinearData::new`],
    /// not stored in the file.
    pub wide: Vec<u32>,
}

/// An MLP owning its data.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpData {
    pub l1: LinearData,
    pub l2: LinearData,
    /// A residual update ([`Mlp::residual`]).
    pub residual: bool,
}

/// The views of a [`NetworkData`]'s processor MLPs ([`NetworkData::views`]).
pub struct Views<'d> {
    edge: Vec<Mlp<'d>>,
    node: Vec<Mlp<'d>>,
}

/// A quantised network owning its data; [`NetworkData::with_network`]
/// lends it as the core's [`Network`].
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkData {
    pub latent: usize,
    pub radius: f32,
    /// The coarse step's membrane the network corrects
    /// ([`Network::coarse`]).
    pub coarse: CoarseGrain,
    pub node_in: [Input; NODE_FEATURES],
    pub edge_in: [Input; EDGE_FEATURES],
    pub out: [Output; 6],
    pub mlps: Parts<MlpData, Vec<MlpData>>,
}

impl LinearData {
    /// A layer from its parts, its widened weights made from `weights`
    /// (none if the shape does not match them).
    pub fn new(inputs: usize, outputs: usize, weights: Vec<i8>, bias: Vec<i32>, shift: Vec<u8>) -> Self {
        let mut wide = vec![0u32; wide_len(inputs, outputs)];
        let n = widen(&weights, inputs, outputs, &mut wide);
        wide.truncate(n);
        LinearData { inputs, outputs, weights, bias, shift, wide }
    }

    /// The layer on `inputs` inputs, its column `k` (of `known`) at
    /// `column(k)` and zero weights on the others.
    fn with_inputs(
        self,
        known: usize,
        inputs: usize,
        column: impl Fn(usize) -> usize,
    ) -> Result<LinearData, FormatError> {
        if self.inputs != known || (0..known).any(|k| column(k) >= inputs) {
            return Err(FormatError::Shape(format!("a node encoder of {} inputs for {known} features", self.inputs)));
        }
        let mut weights = vec![0; inputs * self.outputs];
        for (row, out) in self.weights.chunks_exact(known.max(1)).zip(weights.chunks_exact_mut(inputs)) {
            for (k, &w) in row.iter().enumerate() {
                out[column(k)] = w;
            }
        }
        Ok(LinearData::new(inputs, self.outputs, weights, self.bias, self.shift))
    }

    fn view(&self) -> Linear<'_> {
        Linear {
            inputs: self.inputs,
            outputs: self.outputs,
            weights: &self.weights,
            bias: &self.bias,
            shift: &self.shift,
            wide: &self.wide,
        }
    }
}

impl MlpData {
    fn view(&self) -> Mlp<'_> {
        Mlp { l1: self.l1.view(), l2: self.l2.view(), residual: self.residual }
    }
}

impl NetworkData {
    /// Runs `f` on the core's view of this network.
    pub fn with_network<R>(&self, f: impl FnOnce(&Network) -> R) -> R {
        let views = self.views();
        f(&self.network(&views))
    }

    /// The processor's MLP views, made once for [`NetworkData::network`].
    pub fn views(&self) -> Views<'_> {
        Views {
            edge: self.mlps.edge_mlp.iter().map(MlpData::view).collect(),
            node: self.mlps.node_mlp.iter().map(MlpData::view).collect(),
        }
    }

    /// The core's view of this network over `views` (no allocation).
    pub fn network<'s>(&'s self, views: &'s Views<'s>) -> Network<'s> {
        Network {
            latent: self.latent,
            radius: self.radius,
            coarse: self.coarse,
            node_in: self.node_in,
            edge_in: self.edge_in,
            mlps: Parts {
                node_enc: self.mlps.node_enc.view(),
                edge_enc: self.mlps.edge_enc.view(),
                edge_mlp: &views.edge,
                node_mlp: &views.node,
                head_x: self.mlps.head_x.view(),
                head_v: self.mlps.head_v.view(),
            },
            out: self.out,
            guard: true,
        }
    }

    /// The MLP of `part`, if the network has it.
    pub fn mlp(&self, part: Part) -> Option<&MlpData> {
        self.mlps.get(part)
    }

    /// Bytes of int8 weights, int32 biases and shifts.
    pub fn parameter_bytes(&self) -> usize {
        self.mlps
            .iter()
            .flat_map(|(_, m)| [&m.l1, &m.l2])
            .map(|l| l.weights.len() + 4 * l.bias.len() + l.shift.len())
            .sum()
    }

    /// The file's bytes (with checksum).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        for v in [FORMAT_VERSION, NODE_FEATURES as u32, EDGE_FEATURES as u32, self.latent as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(self.mlps.rounds() as u32).to_le_bytes());
        b.extend_from_slice(&self.radius.to_le_bytes());
        b.extend_from_slice(&self.coarse.stretch.to_le_bytes());
        b.extend_from_slice(&self.coarse.compression.to_le_bytes());
        // No taut strain is written as 0, which a taut strain cannot be.
        b.extend_from_slice(&self.coarse.taut.unwrap_or(0.0).to_le_bytes());
        for i in self.node_in.iter().chain(&self.edge_in) {
            b.extend_from_slice(&i.offset.to_le_bytes());
            b.extend_from_slice(&i.gain.to_le_bytes());
        }
        for o in &self.out {
            b.extend_from_slice(&o.scale.to_le_bytes());
            b.extend_from_slice(&o.offset.to_le_bytes());
        }
        for (_, m) in self.mlps.iter() {
            for l in [&m.l1, &m.l2] {
                b.extend_from_slice(&(l.inputs as u32).to_le_bytes());
                b.extend_from_slice(&(l.outputs as u32).to_le_bytes());
                b.push(!l.shift.is_empty() as u8);
                b.extend(l.weights.iter().map(|&w| w as u8));
                for x in &l.bias {
                    b.extend_from_slice(&x.to_le_bytes());
                }
                b.extend_from_slice(&l.shift);
            }
            b.push(m.residual as u8);
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and validates a file: magic, version, checksum, feature
    /// counts, and every layer shape against weft-core's network.
    pub fn from_bytes(bytes: &[u8]) -> Result<NetworkData, FormatError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(FormatError::BadMagic);
        }
        let mut r = Reader { b: bytes, at: MAGIC.len() };
        let version = r.u32()?;
        if ![FORMAT_VERSION, HISTORYLESS_VERSION, TAUTLESS_VERSION, GRAINLESS_VERSION].contains(&version) {
            return Err(FormatError::Version { found: version, expected: FORMAT_VERSION });
        }
        if bytes.len() < 4 + MAGIC.len() {
            return Err(FormatError::Truncated { at: bytes.len() });
        }
        let body = &bytes[..bytes.len() - 4];
        let stored = u32::from_le_bytes([0, 1, 2, 3].map(|k| bytes[bytes.len() - 4 + k]));
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(FormatError::Checksum { stored, computed });
        }
        let mut r = Reader { b: body, at: r.at };
        let node_features = r.u32()?;
        let (known, column): (&[usize], fn(usize) -> usize) = if version <= HISTORYLESS_VERSION {
            (&[HISTORYLESS_NODE_FEATURES, STEP_NODE_FEATURES, MATERIAL_NODE_FEATURES], historyless_column)
        } else {
            (&[NODE_FEATURES, WINDLESS_NODE_FEATURES, STEP_NODE_FEATURES, MATERIAL_NODE_FEATURES], |k| k)
        };
        if !known.contains(&(node_features as usize)) {
            return Err(FormatError::Features { what: "node", found: node_features, expected: NODE_FEATURES as u32 });
        }
        let found = r.u32()?;
        if found != EDGE_FEATURES as u32 {
            return Err(FormatError::Features { what: "edge", found, expected: EDGE_FEATURES as u32 });
        }
        let latent = r.u32()? as usize;
        let rounds = r.u32()? as usize;
        if rounds > weft_core::gnn::int8::MAX_ROUNDS {
            return Err(FormatError::Shape(format!("{rounds} rounds")));
        }
        let radius = r.f32()?;
        let coarse = if version == GRAINLESS_VERSION {
            CoarseGrain::NONE
        } else {
            let (stretch, compression) = (r.f32()?, r.f32()?);
            let taut = if version == TAUTLESS_VERSION { 0.0 } else { r.f32()? };
            CoarseGrain { stretch, compression, taut: CoarseGrain::taut_from(taut) }
        };
        let mut input = || -> Result<Input, FormatError> { Ok(Input { offset: r.f32()?, gain: r.f32()? }) };
        let mut node_in = [Input { offset: 0.0, gain: 0.0 }; NODE_FEATURES];
        for k in 0..node_features as usize {
            node_in[column(k)] = input()?;
        }
        let mut edge_in = [Input { offset: 0.0, gain: 0.0 }; EDGE_FEATURES];
        for i in &mut edge_in {
            *i = input()?;
        }
        let mut out = [Output { scale: 0.0, offset: 0.0 }; 6];
        for o in &mut out {
            *o = Output { scale: r.f32()?, offset: r.f32()? };
        }
        // In the order of `Part::all`.
        let mut node_enc = r.mlp()?;
        if node_features as usize != NODE_FEATURES || version <= HISTORYLESS_VERSION {
            node_enc.l1 = node_enc.l1.with_inputs(node_features as usize, NODE_FEATURES, column)?;
        }
        let edge_enc = r.mlp()?;
        let edge_mlp = (0..rounds).map(|_| r.mlp()).collect::<Result<Vec<_>, _>>()?;
        let node_mlp = (0..rounds).map(|_| r.mlp()).collect::<Result<Vec<_>, _>>()?;
        let (head_x, head_v) = (r.mlp()?, r.mlp()?);
        let mlps = Parts { node_enc, edge_enc, edge_mlp, node_mlp, head_x, head_v };
        if r.at != body.len() {
            return Err(FormatError::TrailingBytes(body.len() - r.at));
        }
        let net = NetworkData { latent, radius, coarse, node_in, edge_in, out, mlps };
        net.check_shapes()?;
        Ok(net)
    }

    /// Names the first layer that does not fit, then defers to the core's
    /// own validation.
    fn check_shapes(&self) -> Result<(), FormatError> {
        let l = self.latent;
        let expect = |name: &str, m: &MlpData, inputs: usize, outputs: usize| {
            if m.l1.inputs != inputs || m.l2.outputs != outputs || m.l2.inputs != m.l1.outputs {
                Err(FormatError::Shape(format!(
                    "{name} is {}→{}→{}, expected {inputs}→·→{outputs} for latent {l}",
                    m.l1.inputs, m.l1.outputs, m.l2.outputs
                )))
            } else {
                Ok(())
            }
        };
        for (part, m) in self.mlps.iter() {
            let (inputs, outputs) = part.widths(l);
            expect(&describe(part), m, inputs, outputs)?;
        }
        self.with_network(|n| n.validate()).map_err(FormatError::Network)
    }

    /// Rust source defining `pub static NETWORK: Network<'static>` (the
    /// build script's output).
    pub fn to_rust(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "// Generated by weft-weights' build script from the model file. Do not edit.");
        let _ = writeln!(s, "/// Latent width of [`NETWORK`] (for sizing scratch in const context).");
        let _ = writeln!(s, "pub const LATENT: usize = {};", self.latent);
        let _ = writeln!(s, "/// Processor rounds of [`NETWORK`].");
        let _ = writeln!(s, "pub const ROUNDS: usize = {};", self.mlps.rounds());
        let linear = |s: &mut String, name: &str, l: &LinearData| {
            let _ = writeln!(s, "static {name}_W: [i8; {}] = {:?};", l.weights.len(), l.weights);
            let mut wide = vec![0u32; wide_len(l.inputs, l.outputs)];
            widen(&l.weights, l.inputs, l.outputs, &mut wide);
            let _ = writeln!(s, "static {name}_V: [u32; {}] = {:?};", wide.len(), wide);
            let _ = writeln!(s, "static {name}_B: [i32; {}] = {:?};", l.bias.len(), l.bias);
            let _ = writeln!(s, "static {name}_R: [u8; {}] = {:?};", l.shift.len(), l.shift);
        };
        let lin_expr = |name: &str, l: &LinearData| {
            format!(
                "Linear {{ inputs: {}, outputs: {}, weights: &{name}_W, bias: &{name}_B, shift: &{name}_R, \
                 wide: &{name}_V }}",
                l.inputs, l.outputs
            )
        };
        let mlp_expr = |name: &str, m: &MlpData| {
            format!(
                "Mlp {{ l1: {}, l2: {}, residual: {} }}",
                lin_expr(&format!("{name}_L1"), &m.l1),
                lin_expr(&format!("{name}_L2"), &m.l2),
                m.residual
            )
        };
        for (part, m) in self.mlps.iter() {
            let name = part.to_string().to_uppercase();
            linear(&mut s, &format!("{name}_L1"), &m.l1);
            linear(&mut s, &format!("{name}_L2"), &m.l2);
        }
        let m = &self.mlps;
        let list = |prefix: &str, ms: &[MlpData]| {
            let items: Vec<String> = ms.iter().enumerate().map(|(k, m)| mlp_expr(&format!("{prefix}{k}"), m)).collect();
            format!("[{}]", items.join(", "))
        };
        let _ =
            writeln!(s, "static EDGE_MLP: [Mlp<'static>; {}] = {};", m.edge_mlp.len(), list("EDGE_MLP", &m.edge_mlp));
        let _ =
            writeln!(s, "static NODE_MLP: [Mlp<'static>; {}] = {};", m.node_mlp.len(), list("NODE_MLP", &m.node_mlp));
        let inputs = |xs: &[Input]| {
            let v: Vec<String> =
                xs.iter().map(|i| format!("Input {{ offset: {:?}, gain: {:?} }}", i.offset, i.gain)).collect();
            format!("[{}]", v.join(", "))
        };
        let outs: Vec<String> =
            self.out.iter().map(|o| format!("Output {{ scale: {:?}, offset: {:?} }}", o.scale, o.offset)).collect();
        let _ = writeln!(
            s,
            "/// The baked network.\npub static NETWORK: Network<'static> = Network {{ latent: {}, radius: {:?}, \
             coarse: CoarseGrain {{ stretch: {:?}, compression: {:?}, taut: {:?} }}, node_in: {}, edge_in: {}, mlps: Parts {{ node_enc: {}, edge_enc: {}, edge_mlp: &EDGE_MLP, \
             node_mlp: &NODE_MLP, head_x: {}, head_v: {} }}, out: [{}], guard: true }};",
            self.latent,
            self.radius,
            self.coarse.stretch,
            self.coarse.compression,
            self.coarse.taut,
            inputs(&self.node_in),
            inputs(&self.edge_in),
            mlp_expr("NODE_ENC", &m.node_enc),
            mlp_expr("EDGE_ENC", &m.edge_enc),
            mlp_expr("HEAD_X", &m.head_x),
            mlp_expr("HEAD_V", &m.head_v),
            outs.join(", ")
        );
        s
    }
}

/// A part's name in messages.
fn describe(part: Part) -> String {
    match part {
        Part::NodeEncoder => "node encoder".into(),
        Part::EdgeEncoder => "edge encoder".into(),
        Part::EdgeUpdate(r) => format!("edge update {r}"),
        Part::NodeUpdate(r) => format!("node update {r}"),
        Part::PositionHead => "position head".into(),
        Part::VelocityHead => "velocity head".into(),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], FormatError> {
        let end =
            self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or(FormatError::Truncated { at: self.at })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i32(&mut self) -> Result<i32, FormatError> {
        Ok(self.u32()? as i32)
    }
    fn f32(&mut self) -> Result<f32, FormatError> {
        Ok(f32::from_bits(self.u32()?))
    }
    fn flag(&mut self) -> Result<bool, FormatError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            x => Err(FormatError::Shape(format!("flag byte {x} at {}", self.at - 1))),
        }
    }
    fn linear(&mut self) -> Result<LinearData, FormatError> {
        let inputs = self.u32()? as usize;
        let outputs = self.u32()? as usize;
        if inputs > 4096 || outputs > 4096 {
            return Err(FormatError::Shape(format!("a {inputs}×{outputs} layer")));
        }
        let has_shift = self.flag()?;
        let weights = self.take(inputs * outputs)?.iter().map(|&b| b as i8).collect();
        let bias = (0..outputs).map(|_| self.i32()).collect::<Result<_, _>>()?;
        let shift = if has_shift { self.take(outputs)?.to_vec() } else { Vec::new() };
        Ok(LinearData::new(inputs, outputs, weights, bias, shift))
    }
    fn mlp(&mut self) -> Result<MlpData, FormatError> {
        let (l1, l2) = (self.linear()?, self.linear()?);
        let residual = self.flag()?;
        Ok(MlpData { l1, l2, residual })
    }
}
