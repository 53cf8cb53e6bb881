// The plan on every rank: rank 0 broadcasts what it decided (share), and the other ranks replay
// the cache ops rank 0 applied while planning (replay_ops), so every rank's engine holds the same
// rows and blocks. See scheduler_plan.h.
#include "lib/engine/scheduler.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/engine/scheduler_plan.h"

namespace ftx {

void Scheduler::share(Plan& p) {
  if (comm_.size() == 1) return;
  int64_t ids = 0;
  for (const auto& r : p.runs) ids += static_cast<int64_t>(r.feed.size());
  int64_t soft_values = 0;
  for (const auto& s : p.soft) soft_values += static_cast<int64_t>(s.values.size());
  int64_t head[10] = {p.flags,
                     p.beam,
                     static_cast<int64_t>(p.slot.size()),
                     static_cast<int64_t>(p.runs.size()),
                     ids,
                     static_cast<int64_t>(p.error.size()),
                     static_cast<int64_t>(p.ops.size()),
                     static_cast<int64_t>(p.preempt.size()),
                     static_cast<int64_t>(p.resume.size()),
                     soft_values};
  comm_.broadcast(head, sizeof head, 0);
  p.flags = head[0];
  p.beam = head[1];
  const int64_t n = head[2], nruns = head[3], nops = head[6], npre = head[7], nres = head[8];
  if (n + nruns + nops + npre + nres > 0) {
    // [kind, a, b] per op, the preempted and resumed slots, [slot, need, soft first id, soft rows] per newcomer,
    // [row, append, score, embed, length] per run, then every run's ids.
    std::vector<int64_t> body;
    if (comm_.rank() == 0) {
      for (const auto& op : p.ops) body.insert(body.end(), {op[0], op[1], op[2]});
      body.insert(body.end(), p.preempt.begin(), p.preempt.end());
      body.insert(body.end(), p.resume.begin(), p.resume.end());
      for (size_t i = 0; i < p.slot.size(); ++i)
        body.insert(body.end(), {p.slot[i], p.need[i], p.soft[i].first_id, p.soft[i].rows});
      for (const auto& r : p.runs)
        body.insert(body.end(), {r.row, r.append, r.score, r.embed, static_cast<int64_t>(r.feed.size())});
      for (const auto& r : p.runs) body.insert(body.end(), r.feed.begin(), r.feed.end());
    }
    body.resize(static_cast<size_t>(3 * nops + npre + nres + 4 * n + 5 * nruns + head[4]));
    comm_.broadcast(body.data(), body.size() * sizeof(int64_t), 0);
    if (comm_.rank() != 0) {
      const int64_t* e = body.data();
      p.ops.clear();
      for (int64_t i = 0; i < nops; ++i, e += 3)
        p.ops.push_back({static_cast<int32_t>(e[0]), static_cast<int32_t>(e[1]), static_cast<int32_t>(e[2])});
      p.preempt.assign(e, e + npre);
      e += npre;
      p.resume.assign(e, e + nres);
      e += nres;
      p.slot.clear();
      p.need.clear();
      p.soft.assign(static_cast<size_t>(n), SoftPrompt());
      for (int64_t i = 0; i < n; ++i, e += 4) {
        p.slot.push_back(e[0]);
        p.need.push_back(e[1]);
        p.soft[static_cast<size_t>(i)].first_id = static_cast<int32_t>(e[2]);
        p.soft[static_cast<size_t>(i)].rows = e[3];
      }
      p.runs.assign(static_cast<size_t>(nruns), Plan::Run());
      const int64_t* ids_at = e + 5 * nruns;
      for (auto& r : p.runs) {
        r.row = static_cast<int32_t>(e[0]);
        r.append = static_cast<uint8_t>(e[1]);
        r.score = static_cast<uint8_t>(e[2]);
        r.embed = static_cast<uint8_t>(e[3]);
        r.feed.assign(ids_at, ids_at + e[4]);
        ids_at += e[4];
        e += 5;
      }
    }
  }
  if (head[9] > 0) {
    // The soft prompts' rows, newcomer by newcomer.
    std::vector<float> values;
    if (comm_.rank() == 0)
      for (const auto& s : p.soft) values.insert(values.end(), s.values.begin(), s.values.end());
    values.resize(static_cast<size_t>(head[9]));
    comm_.broadcast(values.data(), values.size() * sizeof(float), 0);
    if (comm_.rank() != 0) {
      size_t at = 0;
      for (auto& s : p.soft) {
        const size_t m = static_cast<size_t>(s.rows * engine_.hidden());
        s.values.assign(values.begin() + static_cast<std::ptrdiff_t>(at), values.begin() + static_cast<std::ptrdiff_t>(at + m));
        at += m;
      }
    }
  }
  if (head[5] > 0) {
    p.error.resize(static_cast<size_t>(head[5]));
    comm_.broadcast(&p.error[0], p.error.size(), 0);
  }
}

void Scheduler::replay_ops(const Plan& p) {
  if (comm_.rank() == 0) return;  // rank 0 applied them while planning
  for (const auto& op : p.ops) {
    if (op[0] == Plan::kFork) engine_.copy_rows({op[1]}, {op[2]});
    else engine_.release_rows({op[1]});
  }
}

}  // namespace ftx
