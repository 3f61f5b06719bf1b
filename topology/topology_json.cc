#include "topology/topology_json.h"

#include <nlohmann/json.hpp>

namespace kolo {
namespace {

using Json = nlohmann::json;

Json PlaceJson(const PciPlace& p) {
  return {{"bus_id", p.bus_id},       {"vendor_id", p.vendor_id}, {"device_id", p.device_id},
          {"class_id", p.class_id},   {"bridges", p.bridges},     {"package", p.package},
          {"numa", p.numa},           {"link_gbps", p.link_gbps}, {"path_gbps", p.path_gbps}};
}

PciPlace PlaceFrom(const Json& j) {
  PciPlace p;
  p.bus_id = j.at("bus_id").get<std::string>();
  p.vendor_id = j.at("vendor_id").get<uint16_t>();
  p.device_id = j.at("device_id").get<uint16_t>();
  p.class_id = j.at("class_id").get<uint16_t>();
  p.bridges = j.at("bridges").get<std::vector<uint64_t>>();
  p.package = j.at("package").get<int>();
  p.numa = j.at("numa").get<int>();
  p.link_gbps = j.at("link_gbps").get<double>();
  p.path_gbps = j.at("path_gbps").get<double>();
  return p;
}

// What the link model and kolo-topo index without checking: matrices of GPU x GPU, indices
// of GPUs, NICs, packages and NUMA nodes in range.
Status CheckShape(const Topology& t, const std::string& what) {
  const size_t gpus = t.gpus.size();
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(what + ": inconsistent topology JSON: " + why);
  };
  if (!t.nvlink_gbps.empty() || !t.nvlink_links.empty()) {
    if (t.nvlink_gbps.size() != gpus || t.nvlink_links.size() != gpus) {
      return bad("the NVLink matrices must be " + std::to_string(gpus) + " x " +
                 std::to_string(gpus));
    }
    for (size_t i = 0; i < gpus; ++i) {
      if (t.nvlink_gbps[i].size() != gpus || t.nvlink_links[i].size() != gpus) {
        return bad("NVLink matrix row " + std::to_string(i) + " is not " + std::to_string(gpus) +
                   " long");
      }
    }
  }
  const int packages = static_cast<int>(t.packages.size());
  const int numa = static_cast<int>(t.numa_nodes.size());
  auto check_place = [&](const PciPlace& p, const std::string& name) -> Status {
    if (p.package < -1 || p.package >= packages) return bad(name + " is on no known package");
    if (p.numa < -1 || p.numa >= numa) return bad(name + " is on no known NUMA node");
    return Status::OK();
  };
  for (const Gpu& g : t.gpus) KOLO_RETURN_IF_ERROR(check_place(g.pci, "GPU " + g.pci.bus_id));
  for (const Nic& n : t.nics) KOLO_RETURN_IF_ERROR(check_place(n.pci, "NIC " + n.pci.bus_id));
  for (const PcieSwitch& s : t.switches) {
    for (int g : s.gpus) {
      if (g < 0 || g >= static_cast<int>(gpus)) {
        return bad("switch " + s.bus_id + " lists GPU " + std::to_string(g));
      }
    }
    for (int n : s.nics) {
      if (n < 0 || n >= static_cast<int>(t.nics.size())) {
        return bad("switch " + s.bus_id + " lists NIC " + std::to_string(n));
      }
    }
  }
  return Status::OK();
}

}  // namespace

std::string TopologyToJson(const Topology& t, int indent) {
  Json j;
  j["source"] = t.source;
  j["hostname"] = t.hostname;
  j["cores"] = t.cores;
  j["pus"] = t.pus;
  Json packages = Json::array();
  for (const Package& p : t.packages) {
    packages.push_back({{"os_index", p.os_index}, {"cpu_model", p.cpu_model},
                        {"cpu_vendor", p.cpu_vendor}, {"cores", p.cores}, {"pus", p.pus},
                        {"l3_bytes", p.l3_bytes}});
  }
  j["packages"] = packages;
  Json numa = Json::array();
  for (const NumaNode& n : t.numa_nodes) {
    numa.push_back({{"os_index", n.os_index}, {"package", n.package}, {"bytes", n.bytes}});
  }
  j["numa_nodes"] = numa;
  Json gpus = Json::array();
  for (const Gpu& g : t.gpus) {
    gpus.push_back({{"pci", PlaceJson(g.pci)}, {"model", g.model},
                    {"os_devices", g.os_devices}, {"nvlink_generation", g.nvlink_generation}});
  }
  j["gpus"] = gpus;
  Json nics = Json::array();
  for (const Nic& n : t.nics) {
    nics.push_back({{"pci", PlaceJson(n.pci)}, {"kind", std::string(NicKindName(n.kind))},
                    {"names", n.names}, {"speed_gbit", n.speed_gbit},
                    {"speed_source", n.speed_source}});
  }
  j["nics"] = nics;
  Json switches = Json::array();
  for (const PcieSwitch& s : t.switches) {
    switches.push_back({{"bus_id", s.bus_id}, {"gp_index", s.gp_index}, {"package", s.package},
                        {"gpus", s.gpus}, {"nics", s.nics}});
  }
  j["switches"] = switches;
  j["nvlink_gbps"] = t.nvlink_gbps;
  j["nvlink_links"] = t.nvlink_links;
  j["nvswitch"] = t.nvswitch;
  j["notes"] = t.notes;
  return j.dump(indent);
}

StatusOr<Topology> TopologyFromJson(const std::string& json, const std::string& what) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError(what + ": not a JSON topology object");
  }
  Topology t;
  try {
    t.source = j.at("source").get<std::string>();
    t.hostname = j.at("hostname").get<std::string>();
    t.cores = j.at("cores").get<int>();
    t.pus = j.at("pus").get<int>();
    for (const Json& p : j.at("packages")) {
      Package pkg;
      pkg.os_index = p.at("os_index").get<int>();
      pkg.cpu_model = p.at("cpu_model").get<std::string>();
      pkg.cpu_vendor = p.at("cpu_vendor").get<std::string>();
      pkg.cores = p.at("cores").get<int>();
      pkg.pus = p.at("pus").get<int>();
      pkg.l3_bytes = p.at("l3_bytes").get<uint64_t>();
      t.packages.push_back(std::move(pkg));
    }
    for (const Json& n : j.at("numa_nodes")) {
      t.numa_nodes.push_back({n.at("os_index").get<int>(), n.at("package").get<int>(),
                              n.at("bytes").get<uint64_t>()});
    }
    for (const Json& g : j.at("gpus")) {
      Gpu gpu;
      gpu.pci = PlaceFrom(g.at("pci"));
      gpu.model = g.at("model").get<std::string>();
      gpu.os_devices = g.at("os_devices").get<std::vector<std::string>>();
      gpu.nvlink_generation = g.at("nvlink_generation").get<int>();
      t.gpus.push_back(std::move(gpu));
    }
    for (const Json& n : j.at("nics")) {
      Nic nic;
      nic.pci = PlaceFrom(n.at("pci"));
      const std::string kind = n.at("kind").get<std::string>();
      nic.kind = NicKind::kOther;
      for (NicKind k : {NicKind::kInfiniBand, NicKind::kRoCE, NicKind::kEthernet, NicKind::kEfa}) {
        if (kind == NicKindName(k)) nic.kind = k;
      }
      nic.names = n.at("names").get<std::vector<std::string>>();
      nic.speed_gbit = n.at("speed_gbit").get<double>();
      nic.speed_source = n.at("speed_source").get<std::string>();
      t.nics.push_back(std::move(nic));
    }
    for (const Json& s : j.at("switches")) {
      PcieSwitch sw;
      sw.bus_id = s.at("bus_id").get<std::string>();
      sw.gp_index = s.at("gp_index").get<uint64_t>();
      sw.package = s.at("package").get<int>();
      sw.gpus = s.at("gpus").get<std::vector<int>>();
      sw.nics = s.at("nics").get<std::vector<int>>();
      t.switches.push_back(std::move(sw));
    }
    t.nvlink_gbps = j.at("nvlink_gbps").get<std::vector<std::vector<double>>>();
    t.nvlink_links = j.at("nvlink_links").get<std::vector<std::vector<int>>>();
    t.nvswitch = j.at("nvswitch").get<bool>();
    t.notes = j.at("notes").get<std::vector<std::string>>();
  } catch (const Json::exception& e) {
    return InvalidArgumentError(what + ": malformed topology JSON: " + e.what());
  }
  KOLO_RETURN_IF_ERROR(CheckShape(t, what));
  return t;
}

}  // namespace kolo
