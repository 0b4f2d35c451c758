// The 3D view of the CT (a 3D texture of HU, R16Sint) with the label masks (R8Uint) it
// passes through: a maximum intensity projection, or a volume rendering.
//
// The CPU gives, per view, the affine map from (u, v, t) to continuous voxel indices: uv in
// [0, 1]² across the viewport (y down) and t in [0, 1] along the ray through the volume.
// Each pixel marches `steps` samples along its ray.
// - Maximum intensity projection: the brightest HU is kept; the lesion masks the ray
//   crosses tint it (the nearest first), so a lesion shows where it lies in 3D.
// - Volume rendering: front to back, each sample adds light and opacity from the window
//   (nothing below the window's centre, rising as a square to its top) and the lesion masks add their
//   colour, nearly opaque; the march stops once the pixel is opaque.
// The key slice's plane, when there is one, is drawn where the ray crosses it.
// The bindings are those of slice.wgsl.

struct View {
    // voxel = voxel_from_uvt · (u, v, t, 1)
    voxel_from_uvt: mat4x4<f32>,
    // x: window centre (HU), y: window width (HU), z: 1 to invert grey, w: mask opacity
    window: vec4<f32>,
    // xyz: volume dimensions in voxels; w: millimetres between two samples
    dims: vec4<f32>,
    // x: bit n set = label n is shown; y: samples along each ray;
    // z: the key plane's position (voxels, f32 bits); w: bits 0–1 the key plane's axis + 1
    // (0: none), bit 2 volume rendering
    visible_labels: vec4<u32>,
};

@group(0) @binding(0) var<uniform> view: View;
@group(0) @binding(1) var volume: texture_3d<i32>;
@group(0) @binding(2) var labels: texture_3d<u32>;
@group(0) @binding(3) var<uniform> label_colours: array<vec4<f32>, 16>;

// The colour of a lesion label shown in 3D, or alpha 0.
fn lesion_tint(label: u32) -> vec4<f32> {
    let shown = ((view.visible_labels.x >> min(label, 31u)) & 1u) == 1u;
    // Lesions (9–11, and the masks drawn in the viewer, 15) show through the body.
    let lesion = (label >= 9u && label <= 11u) || label == 15u;
    if (lesion && shown) {
        return label_colours[label];
    }
    return vec4<f32>(0.0);
}

fn grey_of(hu: f32) -> f32 {
    let low = view.window.x - 0.5 * view.window.y;
    var grey = clamp((hu - low) / max(view.window.y, 1.0), 0.0, 1.0);
    if (view.window.z > 0.5) {
        grey = 1.0 - grey;
    }
    return grey;
}

@fragment
fn fs_main(in: VertexOutput) -> @location(0) vec4<f32> {
    let start = (view.voxel_from_uvt * vec4<f32>(in.uv, 0.0, 1.0)).xyz;
    let step = (view.voxel_from_uvt * vec4<f32>(0.0, 0.0, 1.0, 0.0)).xyz;
    let steps = max(view.visible_labels.y, 1u);
    let limit = vec3<i32>(view.dims.xyz) - vec3<i32>(1);
    let label_limit = vec3<i32>(textureDimensions(labels)) - vec3<i32>(1);
    let plane_axis = i32(view.visible_labels.w & 3u) - 1;
    let plane_at = bitcast<f32>(view.visible_labels.z);
    let composite = (view.visible_labels.w & 4u) != 0u;
    // Opacity per millimetre: tissue at the top of the window, and a lesion mask.
    let sample_mm = max(view.dims.w, 1e-3);
    let tissue_alpha = 1.0 - pow(1.0 - 0.08, sample_mm);
    let lesion_alpha = 1.0 - pow(1.0 - 0.25, sample_mm);
    var brightest = -32768.0;
    var hit = false;
    var tint = vec4<f32>(0.0);
    var plane_crossed = false;
    var plane_depth = 2.0;
    var previous_side = 0.0;
    var light = vec3<f32>(0.0);
    var opacity = 0.0;
    for (var i = 0u; i < steps; i = i + 1u) {
        let t = (f32(i) + 0.5) / f32(steps);
        let voxel = start + step * t;
        if (any(voxel < vec3<f32>(-0.5)) || any(voxel > view.dims.xyz - vec3<f32>(0.5))) {
            continue;
        }
        if (plane_axis >= 0 && !plane_crossed) {
            let side = sign(voxel[plane_axis] - plane_at);
            if (hit && side != previous_side) {
                plane_crossed = true;
                plane_depth = t;
            }
            previous_side = side;
        }
        let at = clamp(vec3<i32>(round(voxel)), vec3<i32>(0), limit);
        let hu = f32(textureLoad(volume, at, 0).r);
        hit = true;
        let label = textureLoad(labels, clamp(at, vec3<i32>(0), label_limit), 0).r;
        let lesion = lesion_tint(label);
        if (composite) {
            var colour = vec3<f32>(grey_of(hu));
            // Squared, so soft tissue just above the centre stays clear and contrast, bone
            // and calcium build up.
            let ramp = clamp((hu - view.window.x) / max(0.5 * view.window.y, 1.0), 0.0, 1.0);
            var alpha = tissue_alpha * ramp * ramp;
            if (lesion.a > 0.0 && view.window.w > 0.0) {
                colour = lesion.rgb;
                alpha = max(alpha, lesion_alpha * view.window.w);
            }
            // The key plane is drawn where the ray meets it, behind what lies before it.
            if (plane_crossed && plane_depth == t) {
                light = light + (1.0 - opacity) * 0.35 * vec3<f32>(1.0, 0.85, 0.2);
                opacity = opacity + (1.0 - opacity) * 0.35;
            }
            light = light + (1.0 - opacity) * alpha * colour;
            opacity = opacity + (1.0 - opacity) * alpha;
            if (opacity > 0.98) {
                break;
            }
        } else {
            brightest = max(brightest, hu);
            if (tint.a == 0.0) {
                tint = lesion;
            }
        }
    }
    if (!hit) {
        return vec4<f32>(0.0, 0.0, 0.0, 1.0);
    }
    if (composite) {
        return vec4<f32>(light, 1.0);
    }
    var colour = vec3<f32>(grey_of(brightest));
    if (tint.a > 0.0 && view.window.w > 0.0) {
        colour = mix(colour, tint.rgb, view.window.w * tint.a);
    }
    if (plane_crossed) {
        colour = mix(colour, vec3<f32>(1.0, 0.85, 0.2), 0.3);
    }
    return vec4<f32>(colour, 1.0);
}
