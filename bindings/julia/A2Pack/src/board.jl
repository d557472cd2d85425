# One 2048 board: score, highest tile, moves.

board_score(b::Integer) = Int(L.a2pack_board_score(UInt64(b)))
highest_tile(b::Integer) = Int(L.a2pack_board_highest_tile(UInt64(b)))
apply_move(b::Integer, move::Integer) = L.a2pack_board_apply_move(UInt64(b), UInt32(move))
legal_moves(b::Integer) = Int(L.a2pack_board_legal_moves(UInt64(b)))
function branches_normalise(ev::AbstractVector{<:Real}, legal_mask::Integer)
    length(ev) == 4 || throw(ArgumentError("ev must have 4 values (Up, Down, Left, Right)"))
    e = Float32.(collect(ev))
    out = zeros(Float32, 4)
    L.a2pack_branches_normalise(e, UInt32(legal_mask), out)
    out
end
