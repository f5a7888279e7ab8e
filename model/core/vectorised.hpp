#pragma once

// BATON_VECTORISED marks a function whose element loops GCC should vectorise
// as at -O3 in this -O2 build (CMakeLists.txt): with -O3's cost model
// ("dynamic": at -O2 GCC 12's "very cheap" one leaves scalar every loop
// whose trip count is known only at run time) and loop unswitching (a
// condition the loop does not change, taken out of it). Scalar, the SGD
// pass of two workers' mean over the mlp's 20 M weights took twice as long.
// Only for loops that do the same operations on each element alone (no
// reduction across elements), so that vectorised they give the same bits.
#if defined(__GNUC__) && !defined(__clang__)
#define BATON_VECTORISED __attribute__((optimize("vect-cost-model=dynamic", "unswitch-loops")))
#else
#define BATON_VECTORISED
#endif
