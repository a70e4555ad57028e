// What a VM test of a page does with its producer's output: print it whole
// (the text a page is refreshed from: tests/tools/doc_transcripts.cpp) and
// fail once per difference from the page's quotes (support/transcript.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include "support/transcript.h"

namespace tally::testing {

inline void expectPagesQuote(std::initializer_list<std::string> pages, const std::string& producer,
                             std::string_view produced) {
  std::printf("[ transcript of %s ]\n%.*s[ end of transcript ]\n", producer.c_str(),
              static_cast<int>(produced.size()), produced.data());
  std::fflush(stdout);  // whole, even if a later step hangs the VM
  for (const auto& page : pages)
    for (const auto& d : pageDifferences(page, producer, produced))
      ADD_FAILURE() << d << "(refresh the page from the transcript above: it is this run's output)";
}

}  // namespace tally::testing
