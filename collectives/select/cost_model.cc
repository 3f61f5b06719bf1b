#include "collectives/select/cost_model.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kolo {
namespace {

using Json = nlohmann::json;

Status ReadNumber(const Json& obj, const char* key, const std::string& where, double* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::OK();
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    return InvalidArgumentError(where + ": \"" + key + "\" must be a non-negative number");
  }
  *out = it->get<double>();
  return Status::OK();
}

Status ReadLink(const Json& root, const char* key, const std::string& where, LinkCost* out) {
  auto it = root.find(key);
  if (it == root.end()) return Status::OK();
  if (!it->is_object()) return InvalidArgumentError(where + ": \"" + key + "\" must be an object");
  const std::string inner = where + ": " + key;
  KOLO_RETURN_IF_ERROR(ReadNumber(*it, "alpha_us", inner, &out->alpha_us));
  return ReadNumber(*it, "beta_us", inner, &out->beta_us);
}

// "measured_allreduce": a backend, a layout of positive sizes (nodes x local_size = ranks), bytes
// strictly ascending, and for each algorithm as many times as bytes; every number positive and
// finite.
Status ReadPositives(const Json& array, const std::string& what, std::vector<double>* out) {
  if (!array.is_array()) return InvalidArgumentError(what + " must be an array of numbers");
  for (const Json& v : array) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      return InvalidArgumentError(what + " must hold positive numbers");
    }
    out->push_back(v.get<double>());
  }
  return Status::OK();
}

Status ReadMeasured(const Json& root, const char* key, const std::string& where,
                    MeasuredAllreduce* out) {
  auto it = root.find(key);
  if (it == root.end()) return Status::OK();
  const std::string inner = where + ": " + key;
  if (!it->is_object()) return InvalidArgumentError(inner + " must be an object");
  MeasuredAllreduce m;
  auto backend = it->find("backend");
  if (backend == it->end() || !backend->is_string() || backend->get<std::string>().empty()) {
    return InvalidArgumentError(inner + ": \"backend\" must name the transport (\"mpi\")");
  }
  m.backend = backend->get<std::string>();
  for (auto [name, field] : {std::pair{"ranks", &m.ranks}, std::pair{"nodes", &m.nodes},
                             std::pair{"local_size", &m.local_size}}) {
    auto f = it->find(name);
    if (f == it->end() || !f->is_number_integer() || f->get<int64_t>() < 1 ||
        f->get<int64_t>() > (1 << 24)) {
      return InvalidArgumentError(inner + ": \"" + name + "\" must be a positive integer");
    }
    *field = f->get<int>();
  }
  if (int64_t{m.nodes} * m.local_size != m.ranks) {
    return InvalidArgumentError(inner + ": " + std::to_string(m.nodes) + " nodes of " +
                                std::to_string(m.local_size) + " ranks are not " +
                                std::to_string(m.ranks) + " ranks");
  }
  auto bytes = it->find("bytes");
  if (bytes == it->end()) return InvalidArgumentError(inner + ": \"bytes\" is missing");
  KOLO_RETURN_IF_ERROR(ReadPositives(*bytes, inner + ": \"bytes\"", &m.bytes));
  if (m.bytes.empty()) return InvalidArgumentError(inner + ": \"bytes\" is empty");
  for (size_t i = 1; i < m.bytes.size(); ++i) {
    if (m.bytes[i] <= m.bytes[i - 1]) {
      return InvalidArgumentError(inner + ": \"bytes\" must be strictly ascending");
    }
  }
  auto micros = it->find("micros");
  if (micros == it->end() || !micros->is_object()) {
    return InvalidArgumentError(inner + ": \"micros\" must be an object of arrays by algorithm");
  }
  for (const auto& [name, times] : micros->items()) {
    const std::string what = inner + ": \"micros\" of " + name;
    std::vector<double>& v = m.micros[name];
    KOLO_RETURN_IF_ERROR(ReadPositives(times, what, &v));
    if (v.size() != m.bytes.size()) {
      return InvalidArgumentError(what + " has " + std::to_string(v.size()) + " times for " +
                                  std::to_string(m.bytes.size()) + " sizes");
    }
  }
  *out = std::move(m);
  return Status::OK();
}

}  // namespace

StatusOr<CostModel> CostModel::Load(const std::string& path, const CostModel& base) {
  std::ifstream in(path);
  if (!in) return NotFoundError("tuning file " + path + ": cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  Json root = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string where = "tuning file " + path;
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgumentError(where + ": not a JSON object");
  }
  CostModel m = base;
  KOLO_RETURN_IF_ERROR(ReadLink(root, "intra", where, &m.intra));
  KOLO_RETURN_IF_ERROR(ReadLink(root, "inter", where, &m.inter));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "inter_sharing", where, &m.inter_sharing));
  if (m.inter_sharing < 1) {
    return InvalidArgumentError(where + ": \"inter_sharing\" must be at least 1");
  }
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "inter_duplex", where, &m.inter_duplex));
  if (m.inter_duplex < 1) {
    return InvalidArgumentError(where + ": \"inter_duplex\" must be at least 1");
  }
  KOLO_RETURN_IF_ERROR(ReadLink(root, "device_intra", where, &m.device_intra));
  KOLO_RETURN_IF_ERROR(ReadLink(root, "device_inter", where, &m.device_inter));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "gamma_us", where, &m.gamma_us));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "copy_us", where, &m.copy_us));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "copy_mem_us", where, &m.copy_mem_us));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "cache_bytes", where, &m.cache_bytes));
  KOLO_RETURN_IF_ERROR(ReadNumber(root, "sync_us", where, &m.sync_us));
  KOLO_RETURN_IF_ERROR(ReadMeasured(root, "measured_allreduce", where, &m.measured_allreduce));
  m.source = path;
  if (base.source != "defaults") m.source += " over " + base.source;
  auto it = root.find("measured");
  if (it != root.end() && it->is_string()) {
    m.measured = it->get<std::string>();
    m.source += " (measured " + m.measured + ")";
  }
  return m;
}

StatusOr<CostModel> CostModel::Load(const std::string& path) { return Load(path, CostModel()); }

double CostModel::CopyUs(double working_set) const {
  if (working_set <= cache_bytes) return copy_us;
  const double cached = cache_bytes / working_set;
  return cached * copy_us + (1 - cached) * copy_mem_us;
}

std::string CostModel::ToJson(bool with_device) const {
  Json j;
  j["intra"] = {{"alpha_us", intra.alpha_us}, {"beta_us", intra.beta_us}};
  j["inter"] = {{"alpha_us", inter.alpha_us}, {"beta_us", inter.beta_us}};
  j["inter_sharing"] = inter_sharing;
  j["inter_duplex"] = inter_duplex;
  if (with_device) {
    j["device_intra"] = {{"alpha_us", device_intra.alpha_us}, {"beta_us", device_intra.beta_us}};
    j["device_inter"] = {{"alpha_us", device_inter.alpha_us}, {"beta_us", device_inter.beta_us}};
  }
  j["gamma_us"] = gamma_us;
  j["copy_us"] = copy_us;
  j["copy_mem_us"] = copy_mem_us;
  j["cache_bytes"] = cache_bytes;
  j["sync_us"] = sync_us;
  if (measured_allreduce.ranks > 0) {
    j["measured_allreduce"] = {
        {"backend", measured_allreduce.backend}, {"ranks", measured_allreduce.ranks},
        {"nodes", measured_allreduce.nodes},     {"local_size", measured_allreduce.local_size},
        {"bytes", measured_allreduce.bytes},     {"micros", measured_allreduce.micros}};
  }
  if (!measured.empty()) j["measured"] = measured;
  return j.dump(2);
}

Status CostModel::Save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return InvalidArgumentError("tuning file " + path + ": cannot write it");
  out << ToJson(/*with_device=*/false) << "\n";
  if (!out) return InternalError("tuning file " + path + ": write failed");
  return Status::OK();
}

}  // namespace kolo
