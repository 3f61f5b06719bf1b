// Building a Topology with hwloc 2.x: from this machine, or from an hwloc XML export (lstopo
// --of xml, hwloc 1.x or 2.x format) through the same walk of hwloc's object tree, so every
// fixture exercises the code that runs on a real node.
#ifndef KOLO_TOPOLOGY_HWLOC_TOPOLOGY_H_
#define KOLO_TOPOLOGY_HWLOC_TOPOLOGY_H_

#include <string>

#include "base/status.h"
#include "topology/topology.h"

namespace kolo {

// This machine, I/O devices included. NIC speeds are read from sysfs where the OS reports them
// (/sys/class/infiniband/<dev>/ports/1/rate, /sys/class/net/<if>/speed). kInternal with hwloc's
// errno text if hwloc cannot load (never expected on Linux).
StatusOr<Topology> DiscoverTopology();

// An hwloc XML export of some machine (never this one's sysfs: speeds come from the PCI id
// table). kNotFound "hwloc XML '<path>': cannot open: <reason>" when unreadable,
// kInvalidArgument "hwloc XML '<path>': hwloc cannot parse it ..." when malformed or of a
// version this hwloc refuses (hwloc 2.x reads only 1.x and 2.x exports).
StatusOr<Topology> LoadTopologyXml(const std::string& path);

// KOLO_TOPOLOGY_XML when `xml_path` is set, else this machine.
StatusOr<Topology> LoadTopology(const std::string& xml_path);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_HWLOC_TOPOLOGY_H_
