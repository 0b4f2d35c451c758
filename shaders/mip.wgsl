// A maximum intensity projection of the CT (a 3D texture of HU, R16Sint) with the label
// masks (R8Uint) it passes through, for the rotatable 3D view.
//
// The CPU gives, per view, the affine map from (u, v, t) to continuous voxel indices: uv in
// [0, 1]² across the viewport (y down) and t in [0, 1] along the ray through the volume.
// Each pixel marches `steps` samples along its ray and keeps the brightest HU; the lesion
// masks it crosses tint it (the nearest first), so a lesion shows where it lies in 3D.
// The bindings are those of slice.wgsl.

struct View {
    // voxel = voxel_from_uvt · (u, v, t, 1)
    voxel_from_uvt: mat4x4<f32>,
    // x: window centre (HU), y: window width (HU), z: 1 to invert grey, w: mask opacity
    window: vec4<f32>,
    // xyz: volume dimensions in voxels
    dims: vec4<f32>,
    // x: bit n set = label n is shown; y: samples along each ray
    visible_labels: vec4<u32>,
};

@group(0) @binding(0) var<uniform> view: View;
@group(0) @binding(1) var volume: texture_3d<i32>;
@group(0) @binding(2) var labels: texture_3d<u32>;
@group(0) @binding(3) var<uniform> label_colours: array<vec4<f32>, 16>;

struct VertexOutput {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VertexOutput {
    let x = f32((index << 1u) & 2u);
    let y = f32(index & 2u);
    var out: VertexOutput;
    out.position = vec4<f32>(x * 2.0 - 1.0, 1.0 - y * 2.0, 0.0, 1.0);
    out.uv = vec2<f32>(x, y);
    return out;
}

@fragment
fn fs_main(in: VertexOutput) -> @location(0) vec4<f32> {
    let start = (view.voxel_from_uvt * vec4<f32>(in.uv, 0.0, 1.0)).xyz;
    let step = (view.voxel_from_uvt * vec4<f32>(0.0, 0.0, 1.0, 0.0)).xyz;
    let steps = max(view.visible_labels.y, 1u);
    let limit = vec3<i32>(view.dims.xyz) - vec3<i32>(1);
    let label_limit = vec3<i32>(textureDimensions(labels)) - vec3<i32>(1);
    var brightest = -32768.0;
    var hit = false;
    var tint = vec4<f32>(0.0);
    for (var i = 0u; i < steps; i = i + 1u) {
        let voxel = start + step * ((f32(i) + 0.5) / f32(steps));
        if (any(voxel < vec3<f32>(-0.5)) || any(voxel > view.dims.xyz - vec3<f32>(0.5))) {
            continue;
        }
        let at = clamp(vec3<i32>(round(voxel)), vec3<i32>(0), limit);
        brightest = max(brightest, f32(textureLoad(volume, at, 0).r));
        hit = true;
        if (tint.a == 0.0) {
            let label = textureLoad(labels, clamp(at, vec3<i32>(0), label_limit), 0).r;
            let shown = ((view.visible_labels.x >> min(label, 31u)) & 1u) == 1u;
            // Lesions (9–11, and the masks drawn in the viewer, 15) show through the body.
            let lesion = (label >= 9u && label <= 11u) || label == 15u;
            if (lesion && shown) {
                tint = label_colours[label];
            }
        }
    }
    if (!hit) {
        return vec4<f32>(0.0, 0.0, 0.0, 1.0);
    }
    let low = view.window.x - 0.5 * view.window.y;
    var grey = clamp((brightest - low) / max(view.window.y, 1.0), 0.0, 1.0);
    if (view.window.z > 0.5) {
        grey = 1.0 - grey;
    }
    var colour = vec3<f32>(grey);
    if (tint.a > 0.0 && view.window.w > 0.0) {
        colour = mix(colour, tint.rgb, view.window.w * tint.a);
    }
    return vec4<f32>(colour, 1.0);
}
