// Loads DICOM SR documents as OHIF v3 does, with OHIF's own code: the SR display set of
// @ohif/extension-cornerstone-dicom-sr (its SOP class handler and loader: the measurements it
// finds in the document and the annotations it adds to each image), with the instances read
// and naturalised by dcmjs, as OHIF's metadata store holds them. OHIF's services, the viewer
// and cornerstone are stubbed: what is recorded is what the loader asks them to draw.
//
//   node scripts/ohif/check_sr.js CT_FOLDER SR_FILE...
//
// Prints one JSON object per SR: the measurements OHIF found (tracking identifier, graphic
// type, image) and the annotations it drew (label, image, shapes), or the error that stopped
// it.
// Install first: npm install --prefix scripts/ohif --legacy-peer-deps (see README.md there).
"use strict";

const fs = require("fs");
const path = require("path");
const Module = require("module");

const here = __dirname;
const dcmjs = require(path.join(here, "node_modules", "dcmjs"));

// What the loader asked cornerstone to draw.
const drawn = [];

// A stand-in for any part of OHIF or cornerstone the loader does not use here: every
// property, call and construction gives another stand-in.
function standIn(name) {
  const target = function () {};
  return new Proxy(target, {
    get(_, key) {
      if (key === "__esModule") return false;
      if (key === "then") return undefined;
      if (key === Symbol.toPrimitive) return () => name;
      if (key === "prototype") return {};
      return standIn(`${name}.${String(key)}`);
    },
    apply() {
      return standIn(`${name}()`);
    },
    construct() {
      return standIn(`new ${name}`);
    },
  });
}

// An object whose own keys are real and whose other keys are stand-ins.
function partly(name, real) {
  return new Proxy(real, {
    get(target, key) {
      if (key in target) return target[key];
      if (key === "__esModule") return false;
      if (key === "then") return undefined;
      return standIn(`${name}.${String(key)}`);
    },
  });
}

let guid = 0;
const SR_CLASSES = {
  BasicTextSR: "1.2.840.10008.5.1.4.1.1.88.11",
  EnhancedSR: "1.2.840.10008.5.1.4.1.1.88.22",
  ComprehensiveSR: "1.2.840.10008.5.1.4.1.1.88.33",
  Comprehensive3DSR: "1.2.840.10008.5.1.4.1.1.88.34",
};
const modules = {
  "@ohif/core": partly("@ohif/core", {
    utils: partly("utils", {
      sortStudyInstances() {},
      sortDisplaySetsCopy: (list) => [...list],
      guid: () => `guid-${++guid}`,
      sopClassDictionary: SR_CLASSES,
      formatPN: (x) => x,
      formatDate: (x) => x,
      formatTime: (x) => x,
    }),
    classes: partly("classes", {
      // Image ids here are `sop:UID:FRAME`.
      MetadataProvider: class {
        static getUIDsFromImageID(imageId) {
          const [, sop, frame] = imageId.split(":");
          return { SOPInstanceUID: sop, frameNumber: Number(frame) || 1 };
        }
      },
    }),
  }),
  "@cornerstonejs/tools": partly("@cornerstonejs/tools", {
    annotation: partly("annotation", {
      state: partly("annotation.state", {
        addAnnotation: (annotation) => drawn.push(annotation),
      }),
    }),
  }),
  "@cornerstonejs/adapters": partly("@cornerstonejs/adapters", {
    adaptersSR: partly("adaptersSR", {
      Cornerstone3D: partly("Cornerstone3D", {
        CodeScheme: {
          CodingSchemeDesignator: "CORNERSTONEJS",
          codeValues: { CORNERSTONEFREETEXT: "CORNERSTONEFREETEXT" },
        },
        TEXT_ANNOTATION_POSITION: { value: "111010", schemeDesignator: "DCM" },
        COMMENT_CODE: { value: "121106", schemeDesignator: "DCM" },
        MeasurementReport: partly("MeasurementReport", {
          getAdapterForTrackingIdentifier: () => undefined,
          getAdaptersForTypes: () => [],
        }),
      }),
    }),
  }),
};
const originalLoad = Module._load;
Module._load = function (request, parent, isMain) {
  if (request in modules) return modules[request];
  const local = parent && parent.filename && parent.filename.includes("extension-cornerstone-dicom-sr");
  if (local && !request.startsWith(".") && request !== "dcmjs") return standIn(request);
  return originalLoad.call(this, request, parent, isMain);
};

function naturalised(file) {
  const bytes = fs.readFileSync(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const dicom = dcmjs.data.DicomMessage.readFile(buffer, { ignoreErrors: true });
  return dcmjs.data.DicomMetaDictionary.naturalizeDataset(dicom.dict);
}

async function main() {
  const [ctFolder, ...srFiles] = process.argv.slice(2);
  const ct = fs
    .readdirSync(ctFolder)
    .map((name) => path.join(ctFolder, name))
    .filter((file) => fs.statSync(file).isFile())
    .map((file) => {
      try {
        return naturalised(file);
      } catch (error) {
        return null;
      }
    })
    .filter((instance) => instance && instance.SOPInstanceUID && instance.Modality === "CT");
  const ctDisplaySet = {
    displaySetInstanceUID: "ct",
    Modality: "CT",
    StudyInstanceUID: ct[0] && ct[0].StudyInstanceUID,
    SeriesInstanceUID: ct[0] && ct[0].SeriesInstanceUID,
    FrameOfReferenceUID: ct[0] && ct[0].FrameOfReferenceUID,
    unsupported: false,
    imageIds: ct.map((instance) => `sop:${instance.SOPInstanceUID}:1`),
  };
  const services = {
    displaySetService: partly("displaySetService", {
      activeDisplaySets: [ctDisplaySet],
      subscribe() {},
      EVENTS: { DISPLAY_SETS_ADDED: "added" },
    }),
    measurementService: partly("measurementService", { getSourceMappings: () => [] }),
    customizationService: partly("customizationService", { getCustomization: () => undefined }),
  };
  const dataSource = {
    getImageIdsForDisplaySet: (displaySet) => displaySet.imageIds,
    retrieve: { bulkDataURI: async () => new ArrayBuffer(0) },
  };
  const extensionManager = partly("extensionManager", {
    getDataSources: () => [dataSource],
    getActiveDataSource: () => [dataSource],
  });
  const loaded = require(path.join(
    here,
    "node_modules/@ohif/extension-cornerstone-dicom-sr/dist/ohif-extension-cornerstone-dicom-sr.umd.js"
  ));
  const extension = loaded.default || loaded;
  const [handler] = extension.getSopClassHandlerModule({
    servicesManager: { services },
    extensionManager,
  });
  for (const file of srFiles) {
    drawn.length = 0;
    const result = { file: path.basename(file), measurements: [], drawn: [] };
    try {
      const instance = naturalised(file);
      if (!handler.sopClassUids.includes(instance.SOPClassUID)) {
        result.error = `not an SR class OHIF's SR extension handles (${instance.SOPClassUID})`;
      } else {
        const [displaySet] = handler.getDisplaySetsFromSeries([instance]);
        await displaySet.load();
        result.measurements = (displaySet.measurements || []).map((m) => ({
          tracking: m.TrackingIdentifier,
          graphicType: m.graphicType || null,
          image:
            (m.coords && m.coords[0] && m.coords[0].ReferencedSOPSequence
              && m.coords[0].ReferencedSOPSequence.ReferencedSOPInstanceUID) || null,
          labels: m.labels,
          loaded: m.loaded,
        }));
        result.drawn = drawn.map((annotation) => ({
          label: annotation.data.label || null,
          image: annotation.metadata.referencedImageId
            ? annotation.metadata.referencedImageId.split(":")[1]
            : null,
          graphicType: annotation.metadata.graphicType,
          // How many shapes of each graphic type it draws (a lesion's axes and box: three
          // polylines).
          shapes: Object.fromEntries(
            Object.entries(annotation.data.renderableData || {}).map(([type, list]) => [
              type,
              list.length,
            ])
          ),
        }));
      }
    } catch (error) {
      result.error = `${error.name}: ${error.message}`;
    }
    console.log(JSON.stringify(result));
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
