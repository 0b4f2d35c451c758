// Cuts one plane out of the CT volume (a 3D texture of HU, R16Sint) and applies
// window/level on the GPU; overlays label masks (R8Uint) in colour.
//
// The CPU computes, per view, the affine map from viewport coordinates (uv in [0, 1]²,
// y down) to continuous voxel indices (voxel centres at integers); everything else happens
// here, so scrolling, window/level and zoom only change a 128-byte uniform buffer.

struct View {
    // voxel = voxel_from_uv · (u, v, 0, 1)
    voxel_from_uv: mat4x4<f32>,
    // x: window centre (HU), y: window width (HU), z: 1 to invert grey (MONOCHROME1),
    // w: mask opacity in [0, 1]
    window: vec4<f32>,
    // xyz: volume dimensions in voxels, w: number of label colours in use
    dims: vec4<f32>,
    // x: bit n set = label n is shown
    visible_labels: vec4<u32>,
};

@group(0) @binding(0) var<uniform> view: View;
@group(0) @binding(1) var volume: texture_3d<i32>;
@group(0) @binding(2) var labels: texture_3d<u32>;
@group(0) @binding(3) var<uniform> label_colours: array<vec4<f32>, 16>;

fn load_hu(voxel: vec3<i32>) -> f32 {
    let limit = vec3<i32>(view.dims.xyz) - vec3<i32>(1);
    return f32(textureLoad(volume, clamp(voxel, vec3<i32>(0), limit), 0).r);
}

// Trilinear interpolation from integer loads (integer textures cannot be filtered).
fn sample_hu(position: vec3<f32>) -> f32 {
    let base = floor(position);
    let f = position - base;
    let b = vec3<i32>(base);
    let c000 = load_hu(b);
    let c100 = load_hu(b + vec3<i32>(1, 0, 0));
    let c010 = load_hu(b + vec3<i32>(0, 1, 0));
    let c110 = load_hu(b + vec3<i32>(1, 1, 0));
    let c001 = load_hu(b + vec3<i32>(0, 0, 1));
    let c101 = load_hu(b + vec3<i32>(1, 0, 1));
    let c011 = load_hu(b + vec3<i32>(0, 1, 1));
    let c111 = load_hu(b + vec3<i32>(1, 1, 1));
    let x00 = mix(c000, c100, f.x);
    let x10 = mix(c010, c110, f.x);
    let x01 = mix(c001, c101, f.x);
    let x11 = mix(c011, c111, f.x);
    return mix(mix(x00, x10, f.y), mix(x01, x11, f.y), f.z);
}

@fragment
fn fs_main(in: VertexOutput) -> @location(0) vec4<f32> {
    let voxel = (view.voxel_from_uv * vec4<f32>(in.uv, 0.0, 1.0)).xyz;
    let inside = all(voxel >= vec3<f32>(-0.5)) && all(voxel <= view.dims.xyz - vec3<f32>(0.5));
    if (!inside) {
        return vec4<f32>(0.0, 0.0, 0.0, 1.0);
    }
    let hu = sample_hu(voxel);
    let low = view.window.x - 0.5 * view.window.y;
    var grey = clamp((hu - low) / max(view.window.y, 1.0), 0.0, 1.0);
    if (view.window.z > 0.5) {
        grey = 1.0 - grey;
    }
    var colour = vec3<f32>(grey);
    // Without masks the label texture is a single empty voxel: clamp to its own size.
    let label_limit = vec3<i32>(textureDimensions(labels)) - vec3<i32>(1);
    let label_voxel = clamp(vec3<i32>(round(voxel)), vec3<i32>(0), label_limit);
    let label = textureLoad(labels, label_voxel, 0).r;
    let shown = ((view.visible_labels.x >> min(label, 31u)) & 1u) == 1u;
    if (label > 0u && shown && view.window.w > 0.0) {
        let tint = label_colours[min(label, 15u)];
        colour = mix(colour, tint.rgb, view.window.w * tint.a);
    }
    return vec4<f32>(colour, 1.0);
}
