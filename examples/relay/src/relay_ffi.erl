-module(relay_ffi).

-export([system_time_ms/0, monotonic_ms/0, random_uniform/0, unique_id/0,
         get_env/1, log/2]).

%% Wall-clock milliseconds since the Unix epoch.
system_time_ms() ->
    erlang:system_time(millisecond).

%% Milliseconds from an arbitrary, monotonically increasing origin.
monotonic_ms() ->
    erlang:monotonic_time(millisecond).

%% A float in the half-open range [0.0, 1.0).
random_uniform() ->
    rand:uniform().

%% A short, process-unique identifier such as <<"s-4f2a9c01">>.
unique_id() ->
    N = erlang:unique_integer([positive, monotonic]),
    Salt = rand:uniform(16#FFFF),
    iolist_to_binary(io_lib:format("s-~.16b~4.16.0b", [N, Salt])).

get_env(Name) when is_binary(Name) ->
    case os:getenv(binary_to_list(Name)) of
        false -> {error, nil};
        Value -> {ok, unicode:characters_to_binary(Value)}
    end.

log(Level, Message) when is_atom(Level) ->
    logger:log(Level, "~ts", [Message]),
    nil.
