#include "runtime/world/process_set_calls.h"

#include <algorithm>

#include "base/rank_list.h"

namespace kolo {

std::string ProcessSetCall::ToString() const {
  if (kind == kRemove) return "remove_process_set(" + std::to_string(id) + ")";
  return "add_process_set(" + (valid ? BracketedRanks(ranks) : std::string("an invalid list")) +
         ")";
}

std::vector<int32_t> EncodeCall(const ProcessSetCall& call, int size) {
  std::vector<int32_t> row(static_cast<size_t>(size) + 2, -1);
  row[0] = call.kind;
  if (call.kind == ProcessSetCall::kRemove) {
    row[1] = call.id;
  } else if (call.valid && call.ranks.size() <= static_cast<size_t>(size)) {
    row[1] = static_cast<int32_t>(call.ranks.size());
    std::copy(call.ranks.begin(), call.ranks.end(), row.begin() + 2);
  }
  return row;
}

ProcessSetCall DecodeCall(const int32_t* row, int size) {
  ProcessSetCall call;
  call.kind = row[0] == ProcessSetCall::kRemove ? ProcessSetCall::kRemove : ProcessSetCall::kAdd;
  if (call.kind == ProcessSetCall::kRemove) {
    call.id = row[1];
  } else if (row[1] < 0 || row[1] > size) {
    call.valid = false;
  } else {
    call.ranks.assign(row + 2, row + 2 + row[1]);
  }
  return call;
}

std::string DescribeDifferences(const std::vector<ProcessSetCall>& calls) {
  std::vector<ProcessSetCall> distinct;
  std::vector<std::vector<int>> callers;
  bool all_add = true, all_remove = true;
  for (size_t r = 0; r < calls.size(); ++r) {
    const size_t g = std::find(distinct.begin(), distinct.end(), calls[r]) - distinct.begin();
    if (g == distinct.size()) {
      distinct.push_back(calls[r]);
      callers.emplace_back();
    }
    callers[g].push_back(static_cast<int>(r));
    all_add = all_add && calls[r].kind == ProcessSetCall::kAdd;
    all_remove = all_remove && calls[r].kind == ProcessSetCall::kRemove;
  }
  if (distinct.size() <= 1) return "";
  std::string msg;
  for (size_t g = 0; g < distinct.size(); ++g) {
    const ProcessSetCall& c = distinct[g];
    const bool one = callers[g].size() == 1;
    msg += (g ? ", " : "") + RanksPhrase(callers[g]);
    if (all_add) {
      msg += " passed " + (c.valid ? BracketedRanks(c.ranks) : std::string("an invalid list"));
    } else if (all_remove) {
      msg += (one ? " removes " : " remove ") + std::to_string(c.id);
    } else {
      msg += " called " + c.ToString();
    }
  }
  return msg;
}

StatusOr<std::vector<ProcessSetCall>> ExchangeCalls(Runtime& global, const ProcessSetCall& mine) {
  const int size = global.layout().size;
  const std::vector<int32_t> row = EncodeCall(mine, size);
  Submission s;
  s.op = OpType::kAllgather;
  s.name = kProcessSetCallsName;
  s.input = row.data();
  s.dtype = DataType::kInt32;
  s.shape = {1, static_cast<int64_t>(row.size())};
  s.device = -1;  // host memory
  auto handle = global.Enqueue(s);
  if (!handle.ok()) return handle.status();
  const Status& done = (*handle)->Wait();
  if (!done.ok()) return done;
  const OutputBuffer& out = (*handle)->output();
  if (out.shape.size() != 2 || out.shape[0] != size ||
      out.shape[1] != static_cast<int64_t>(row.size())) {
    return InternalError("the all-gather of the ranks' calls returned a tensor of another shape");
  }
  const auto* rows = static_cast<const int32_t*>(out.data.get());
  std::vector<ProcessSetCall> calls;
  calls.reserve(size);
  for (int r = 0; r < size; ++r) calls.push_back(DecodeCall(rows + r * row.size(), size));
  return calls;
}

}  // namespace kolo
