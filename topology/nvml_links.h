// NVLink from NVML, for live machines whose hwloc has no NVLinkBandwidth matrix (hwloc built
// without its NVML plugin, or older than 2.5, as in most real exports). NVML ships with the NVIDIA driver (libnvidia-ml.so.1) and is opened at run
// time, so kolo neither links nor needs it: without a driver this does nothing.
#ifndef KOLO_TOPOLOGY_NVML_LINKS_H_
#define KOLO_TOPOLOGY_NVML_LINKS_H_

#include "topology/topology.h"

namespace kolo {

// Fills topo->nvlink_gbps / nvlink_links / nvswitch from NVML's per-link state and remote PCI
// ids: a link whose remote end is another GPU of `topo` counts toward that pair; links to
// anything else (NVSwitches) count toward the GPU's bandwidth into the switch fabric, and a
// pair of fabric GPUs gets the lower of their two totals (as the hwloc path does). Returns
// false, changing nothing, when NVML cannot be opened or reports no active link; adds a note
// when it filled the matrix.
bool FillNvlinkFromNvml(Topology* topo);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_NVML_LINKS_H_
