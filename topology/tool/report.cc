#include "topology/tool/report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "topology/topology_json.h"

namespace kolo::topo_tool {

namespace {

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string PairClass(const Topology& t, LinkClass c, int a, int b) {
  if (c == LinkClass::kNVLink && !t.nvlink_links.empty()) {
    return "NV" + std::to_string(t.nvlink_links[a][b]);
  }
  return std::string(LinkClassName(c));
}

void Matrix(const Topology& t, std::string* out) {
  const int g = static_cast<int>(t.gpus.size()), n = static_cast<int>(t.nics.size());
  if (g == 0 && n == 0) return;
  *out += "  matrix (nvidia-smi topo -m style):\n          ";
  for (int j = 0; j < g; ++j) *out += Printf("%-6s", ("GPU" + std::to_string(j)).c_str());
  for (int j = 0; j < n; ++j) *out += Printf("%-6s", ("NIC" + std::to_string(j)).c_str());
  *out += "\n";
  auto row = [&](const std::string& label, auto cls_gpu, auto cls_nic) {
    *out += Printf("    %-6s", label.c_str());
    for (int j = 0; j < g; ++j) *out += Printf("%-6s", cls_gpu(j).c_str());
    for (int j = 0; j < n; ++j) *out += Printf("%-6s", cls_nic(j).c_str());
    *out += "\n";
  };
  for (int i = 0; i < g; ++i) {
    row("GPU" + std::to_string(i),
        [&](int j) { return PairClass(t, t.GpuLink(i, j), i, j); },
        [&](int j) { return std::string(LinkClassName(t.GpuNicLink(i, j))); });
  }
  for (int i = 0; i < n; ++i) {
    row("NIC" + std::to_string(i),
        [&](int j) { return std::string(LinkClassName(t.GpuNicLink(j, i))); },
        [&](int j) { return std::string(LinkClassName(PciLink(t.nics[i].pci, t.nics[j].pci))); });
  }
  *out += "  legend: X self, NV# NVLink (# links), PIX one PCIe switch, PXB several switches, "
          "PHB host bridge, NODE across host bridges of a package, SYS across packages\n";
}

void Node(const Topology& t, int index, const std::vector<int>& ranks, std::string* out) {
  *out += Printf("node %d", index);
  if (!t.hostname.empty()) *out += " (" + t.hostname + ")";
  if (!ranks.empty()) {
    *out += Printf(", ranks %d", ranks.front());
    if (ranks.size() > 1) *out += Printf("-%d", ranks.back());
  }
  *out += "  [" + t.source + "]\n";
  *out += Printf("  %zu package(s), %zu NUMA node(s), %d cores, %d PUs\n", t.packages.size(),
                 t.numa_nodes.size(), t.cores, t.pus);
  for (size_t p = 0; p < t.packages.size(); ++p) {
    const Package& pk = t.packages[p];
    *out += Printf("    package %zu: %s, %d cores, %d PUs, L3 %s\n", p,
                   pk.cpu_model.empty() ? "(model unknown)" : pk.cpu_model.c_str(), pk.cores,
                   pk.pus, HumanBytes(pk.l3_bytes).c_str());
  }
  *out += Printf("  GPUs: %zu%s\n", t.gpus.size(), t.nvswitch ? " (NVLink through NVSwitch)" : "");
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    const Gpu& g = t.gpus[i];
    int sw = -1;
    for (size_t s = 0; s < t.switches.size(); ++s) {
      for (int x : t.switches[s].gpus) {
        if (x == static_cast<int>(i)) sw = static_cast<int>(s);
      }
    }
    const int nic = t.ClosestNic(static_cast<int>(i));
    *out += Printf("    GPU%zu %s [%04x:%04x] %s, package %d, PCIe %.1f GB/s%s%s\n", i,
                   g.pci.bus_id.c_str(), g.pci.vendor_id, g.pci.device_id,
                   g.model.empty() ? "(model unknown)" : g.model.c_str(), g.pci.package,
                   g.pci.path_gbps,
                   sw >= 0 ? (", switch " + t.switches[sw].bus_id).c_str() : "",
                   nic >= 0 ? (", sends via NIC" + std::to_string(nic)).c_str() : "");
  }
  *out += Printf("  NICs: %zu\n", t.nics.size());
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const Nic& n = t.nics[i];
    std::vector<std::string> gpus;
    if (!t.gpus.empty()) {
      for (int g : t.ClosestGpus(static_cast<int>(i))) gpus.push_back("GPU" + std::to_string(g));
    }
    *out += Printf("    NIC%zu %s %s %s, %s, package %d%s\n", i, n.pci.bus_id.c_str(),
                   Join(n.names, "/").c_str(), std::string(NicKindName(n.kind)).c_str(),
                   n.speed_gbit > 0 ? Printf("%.0f Gbit/s (%s)", n.speed_gbit,
                                             n.speed_source.c_str()).c_str()
                                    : "speed unknown",
                   n.pci.package,
                   gpus.empty() ? "" : (", closest " + Join(gpus, " ")).c_str());
  }
  Matrix(t, out);
  for (const std::string& note : t.notes) *out += "  note: " + note + "\n";
}

std::string LinkLine(const char* what, const Link& l) {
  return Printf("  %-34s %-5s %8.2f GB/s  alpha %5.2f us  (%s)\n", what,
                std::string(LinkClassName(l.cls)).c_str(), l.gbps, l.alpha_us, l.basis.c_str());
}

std::string CostLine(const char* what, const LinkCost& c) {
  return Printf("  %-14s alpha %6.2f us  beta %8.3f GB/s\n", what, c.alpha_us,
                c.beta_us > 0 ? 1.0 / (c.beta_us * 1000.0) : 0.0);
}

void Table(const Report& r, std::string* out) {
  *out += "decision table: all-reduce of float32 (sum), " + r.shape.Describe() +
          (r.shape_given ? " (given)" : "") + "\n";
  *out += Printf("  %-9s | %-13s %10s %9s  %-13s | %-17s %10s %9s  %-17s\n", "size",
                 "host: algo", "time us", "busbw", "runner-up", "device: algo", "time us",
                 "busbw", "runner-up");
  for (size_t i = 0; i < r.host.size(); ++i) {
    const Decision& h = r.host[i];
    std::string dev = "(no GPU)";
    if (i < r.device.size()) {
      const Decision& d = r.device[i];
      dev = Printf("%-17s %10.1f %9.2f  %-17s", d.best.c_str(), d.best_us, d.busbw_gbps,
                   d.runner_up.c_str());
    }
    *out += Printf("  %-9s | %-13s %10.1f %9.2f  %-13s | %s\n", HumanBytes(h.bytes).c_str(),
                   h.best.c_str(), h.best_us, h.busbw_gbps, h.runner_up.c_str(), dev.c_str());
  }
  *out += "  (time: predicted by the cost model; busbw in GB/s = bytes/time x 2(p-1)/p)\n";
}

nlohmann::json LinkJson(const Link& l) {
  return {{"class", std::string(LinkClassName(l.cls))}, {"gbps", l.gbps},
          {"alpha_us", l.alpha_us}, {"nvlinks", l.nvlinks}, {"basis", l.basis}};
}

nlohmann::json DecisionsJson(const std::vector<Decision>& ds) {
  nlohmann::json a = nlohmann::json::array();
  for (const Decision& d : ds) {
    a.push_back({{"bytes", d.bytes}, {"algorithm", d.best}, {"time_us", d.best_us},
                 {"busbw_gbps", d.busbw_gbps}, {"runner_up", d.runner_up},
                 {"runner_up_us", d.runner_up_us}});
  }
  return a;
}

}  // namespace

std::string HumanBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == static_cast<double>(static_cast<long long>(v))
             ? Printf("%lld %s", static_cast<long long>(v), units[u])
             : Printf("%.1f %s", v, units[u]);
}

std::string TextReport(const Report& r) {
  std::string out;
  for (size_t n = 0; n < r.job.nodes.size(); ++n) {
    const NodeLinks* nl = n < r.links.nodes.size() ? &r.links.nodes[n] : nullptr;
    Node(r.job.nodes[n], static_cast<int>(n), nl ? nl->ranks : std::vector<int>{}, &out);
    // Identical nodes of a given shape: one is enough.
    if (r.shape_given) {
      if (r.shape.nodes > 1) out += Printf("(and %d more like it)\n", r.shape.nodes - 1);
      break;
    }
  }
  out += "\nlink model (" + r.shape.Describe() + ", " +
         (r.links.homogeneous ? "homogeneous" : "heterogeneous") +
         (r.job.simulated_nodes ? ", nodes simulated on one machine" : "") + "):\n";
  out += LinkLine("host, slowest pair of local ranks", r.links.intra_host);
  if (r.links.gpus) out += LinkLine("GPU, slowest pair of local ranks", r.links.intra_device);
  out += LinkLine("host, slowest rank's NIC share", r.links.inter_host);
  if (r.links.gpus) out += LinkLine("GPU, slowest rank's NIC share", r.links.inter_device);
  if (!r.links.nodes.empty() && !r.links.nodes[0].ranks.empty()) {
    const NodeLinks& nl = r.links.nodes[0];
    out += "  ranks of node 0: ";
    std::vector<std::string> places;
    for (size_t l = 0; l < nl.ranks.size(); ++l) {
      const RankPlace& p = r.links.ranks[nl.ranks[l]];
      places.push_back(Printf("%d->", nl.ranks[l]) +
                       (p.gpu >= 0 ? "GPU" + std::to_string(p.gpu) + "/" : "") + "pkg" +
                       std::to_string(p.package) +
                       (p.nic >= 0 ? "/NIC" + std::to_string(p.nic) : ""));
    }
    out += Join(places, " ") + "\n";
  }
  for (const std::string& note : r.links.notes) {
    if (note.rfind("nodes simulated", 0) == 0) out += "  note: " + note + "\n";
  }
  out += "\ncost model (" + r.cost.source + "):\n";
  out += CostLine("intra (host)", r.cost.intra);
  out += CostLine("inter (host)", r.cost.inter);
  out += CostLine("device intra", r.cost.device_intra);
  out += CostLine("device inter", r.cost.device_inter);
  out += "\n";
  Table(r, &out);
  return out;
}

std::string JsonReport(const Report& r) {
  nlohmann::json j;
  nlohmann::json nodes = nlohmann::json::array();
  for (const Topology& t : r.job.nodes) nodes.push_back(nlohmann::json::parse(TopologyToJson(t)));
  j["nodes"] = nodes;
  j["job"] = {{"nodes", r.shape.nodes},         {"ranks", r.shape.ranks},
              {"max_ranks_per_node", r.shape.max_local}, {"min_ranks_per_node", r.shape.min_local},
              {"given", r.shape_given},          {"simulated_nodes", r.job.simulated_nodes}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankPlace& p : r.links.ranks) {
    ranks.push_back({{"node", p.node}, {"local_rank", p.local_rank}, {"package", p.package},
                     {"gpu", p.gpu}, {"nic", p.nic}});
  }
  j["link_model"] = {{"ranks", ranks},
                     {"homogeneous", r.links.homogeneous},
                     {"multi_node", r.links.multi_node},
                     {"intra_host", LinkJson(r.links.intra_host)},
                     {"inter_host", LinkJson(r.links.inter_host)}};
  if (r.links.gpus) {
    j["link_model"]["intra_device"] = LinkJson(r.links.intra_device);
    j["link_model"]["inter_device"] = LinkJson(r.links.inter_device);
  }
  j["cost_model"] = nlohmann::json::parse(r.cost.ToJson());
  j["cost_model"]["source"] = r.cost.source;
  j["decisions"] = {{"host", DecisionsJson(r.host)}, {"device", DecisionsJson(r.device)}};
  return j.dump(2);
}

}  // namespace kolo::topo_tool
