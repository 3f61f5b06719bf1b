// Ranks as the error messages name them.
#ifndef KOLO_BASE_RANK_LIST_H_
#define KOLO_BASE_RANK_LIST_H_

#include <string>
#include <vector>

namespace kolo {

// "0", "1,3", "0-2,5": ranks in ascending order, runs of three or more collapsed.
std::string RankList(const std::vector<int>& ranks);

// "rank 3", "ranks 0-2,5": RankList after the word its count takes, as a message's subject.
std::string RanksPhrase(const std::vector<int>& ranks);

// "[3,0,0]": a caller's list of ranks echoed as given (order and repeats kept).
std::string BracketedRanks(const std::vector<int>& ranks);

}  // namespace kolo

#endif  // KOLO_BASE_RANK_LIST_H_
