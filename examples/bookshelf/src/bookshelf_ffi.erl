-module(bookshelf_ffi).

-export([now_millis/0, today/0, random_id/1, get_env/1, format_iso_date/1,
         parse_iso_date/1, self_pid/0, log_line/2]).

%% Milliseconds since the Unix epoch, wall clock.
now_millis() ->
    erlang:system_time(millisecond).

%% Days since 1970-01-01 in UTC.
today() ->
    {Date, _Time} = calendar:universal_time(),
    calendar:date_to_gregorian_days(Date) - epoch_days().

%% A lowercase hexadecimal identifier made of `Bytes` random bytes.
random_id(Bytes) when is_integer(Bytes), Bytes > 0 ->
    Raw = crypto:strong_rand_bytes(Bytes),
    list_to_binary(string:lowercase(binary_to_list(binary:encode_hex(Raw)))).

get_env(Name) when is_binary(Name) ->
    case os:getenv(binary_to_list(Name)) of
        false -> {error, nil};
        Value -> {ok, unicode:characters_to_binary(Value)}
    end.

format_iso_date(Days) when is_integer(Days) ->
    {Y, M, D} = calendar:gregorian_days_to_date(Days + epoch_days()),
    iolist_to_binary(io_lib:format("~4..0B-~2..0B-~2..0B", [Y, M, D])).

parse_iso_date(<<Y:4/binary, "-", M:2/binary, "-", D:2/binary>>) ->
    try
        Date = {binary_to_integer(Y), binary_to_integer(M), binary_to_integer(D)},
        case calendar:valid_date(Date) of
            true -> {ok, calendar:date_to_gregorian_days(Date) - epoch_days()};
            false -> {error, nil}
        end
    catch
        error:badarg -> {error, nil}
    end;
parse_iso_date(_) ->
    {error, nil}.

self_pid() ->
    erlang:self().

log_line(Level, Message) ->
    logger:log(Level, "~ts", [Message]),
    nil.

epoch_days() ->
    calendar:date_to_gregorian_days({1970, 1, 1}).
