//! 2048 boards: a `u64` of 16 nibbles, cell 0 (top-left) in the high nibble,
//! each the tile's exponent (0 = empty). All pure functions of the library.

use a2pack_sys as sys;

/// One of the four moves, in the library's order (Up, Down, Left, Right).
///
/// ```
/// assert_eq!(a2pack::Move::from_index(2), Some(a2pack::Move::Left));
/// assert_eq!(a2pack::Move::Right as u8, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Move {
    /// Slide up (0).
    Up = 0,
    /// Slide down (1).
    Down = 1,
    /// Slide left (2).
    Left = 2,
    /// Slide right (3).
    Right = 3,
}

impl Move {
    /// All moves, in index order.
    pub const ALL: [Move; 4] = [Move::Up, Move::Down, Move::Left, Move::Right];

    /// The move of index 0..3 (`None` otherwise).
    pub fn from_index(i: u8) -> Option<Move> {
        Move::ALL.get(usize::from(i)).copied()
    }
}

/// A 2048 board.
///
/// ```
/// use a2pack::{Board, Move};
/// // Two 2-tiles (exponent 1) side by side in the top row.
/// let board = Board::from_cells([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
/// let merged = board.apply(Move::Left);
/// assert_eq!(merged.cells()[0], 2); // one 4-tile
/// assert_eq!(merged.highest_tile(), 4);
/// assert_eq!(merged.score(), 4);
/// assert!(board.legal_moves().contains(Move::Left));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Board(pub u64);

impl Board {
    /// A board from 16 tile exponents, row-major from the top-left.
    pub fn from_cells(cells: [u8; 16]) -> Board {
        Board(cells.iter().fold(0u64, |b, &c| (b << 4) | u64::from(c & 0xF)))
    }

    /// The 16 tile exponents, row-major from the top-left.
    pub fn cells(self) -> [u8; 16] {
        std::array::from_fn(|i| ((self.0 >> (60 - 4 * i)) & 0xF) as u8)
    }

    /// Classic merge score: sum over tiles 2^e (e >= 2) of (e-1)*2^e.
    pub fn score(self) -> u64 {
        // SAFETY: pure function.
        unsafe { sys::a2pack_board_score(self.0) }
    }

    /// Value of the highest tile (e.g. 2048), 0 for an empty board.
    pub fn highest_tile(self) -> u32 {
        // SAFETY: pure function.
        unsafe { sys::a2pack_board_highest_tile(self.0) }
    }

    /// The board after sliding (no spawn); unchanged when the move is illegal.
    pub fn apply(self, mv: Move) -> Board {
        // SAFETY: pure function.
        Board(unsafe { sys::a2pack_board_apply_move(self.0, mv as u32) })
    }

    /// The moves that change the board.
    pub fn legal_moves(self) -> MoveSet {
        // SAFETY: pure function.
        MoveSet(unsafe { sys::a2pack_board_legal_moves(self.0) } as u8)
    }
}

/// A set of moves as the library's bitmask (bit i = move i).
///
/// ```
/// use a2pack::{Move, MoveSet};
/// let set = MoveSet(0b0101);
/// assert!(set.contains(Move::Up) && set.contains(Move::Left));
/// assert_eq!(set.iter().collect::<Vec<_>>(), vec![Move::Up, Move::Left]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MoveSet(pub u8);

impl MoveSet {
    /// Whether `mv` is in the set.
    pub fn contains(self, mv: Move) -> bool {
        self.0 & (1 << mv as u8) != 0
    }

    /// Whether no move is in the set (game over, for legal moves).
    pub fn is_empty(self) -> bool {
        self.0 & 0xF == 0
    }

    /// The moves of the set, in index order.
    pub fn iter(self) -> impl Iterator<Item = Move> {
        Move::ALL.into_iter().filter(move |&m| self.contains(m))
    }
}

/// The upstream per-step branch normalisation: the raw expected values of
/// the 4 moves and which are legal, to normalised values (0 where illegal).
///
/// ```
/// let out = a2pack::branches_normalise([1.0, 2.0, 0.0, 4.0], a2pack::MoveSet(0b1011));
/// assert_eq!(out[2], 0.0);
/// ```
pub fn branches_normalise(ev: [f32; 4], legal: MoveSet) -> [f32; 4] {
    let mut out = [0f32; 4];
    // SAFETY: both arrays hold 4 floats.
    unsafe { sys::a2pack_branches_normalise(ev.as_ptr(), u32::from(legal.0), out.as_mut_ptr()) };
    out
}
