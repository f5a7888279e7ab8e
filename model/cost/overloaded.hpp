#pragma once

// overloaded{f, g, ...}: one callable of several lambdas, for std::visit over
// the strategies of the cost model.

namespace baton::model::cost {

template <class... Fs> struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs> overloaded(Fs...) -> overloaded<Fs...>;

} // namespace baton::model::cost
